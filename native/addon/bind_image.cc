#include "addon/bind_image.h"

#include <array>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"
#include "image/preprocess.h"
#include "image/resize.h"

namespace tessera::addon {
namespace {

using image::Layout;
using image::PreprocessRequest;

Napi::Value rejected(Napi::Env env, Code code, const std::string& message) {
  if (env.IsExceptionPending()) env.GetAndClearPendingException();  // e.g. a throwing getter
  auto d = Napi::Promise::Deferred::New(env);
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code_name(code)));
  d.Reject(e.Value());
  return d.Promise();
}

// Argument readers: throw tessera::Error(InvalidArgument) naming the field.
double num(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsNumber()) fail(Code::InvalidArgument, std::string("image: option '") + key + "' must be a number");
  return v.As<Napi::Number>().DoubleValue();
}
int int_arg(const Napi::Object& o, const char* key, int lo, int hi) {
  double d = num(o, key);
  if (!(d >= lo && d <= hi) || d != double(int(d)))
    fail(Code::InvalidArgument, std::string("image: option '") + key + "' must be an integer in [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return int(d);
}
int int_or(const Napi::Object& o, const char* key, int lo, int hi, int dflt) {
  return o.Get(key).IsUndefined() ? dflt : int_arg(o, key, lo, hi);
}
bool flag(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsBoolean()) fail(Code::InvalidArgument, std::string("image: option '") + key + "' must be a boolean");
  return v.As<Napi::Boolean>().Value();
}
std::string str(const Napi::Object& o, const char* key) {
  Napi::Value v = o.Get(key);
  if (!v.IsString()) fail(Code::InvalidArgument, std::string("image: option '") + key + "' must be a string");
  return v.As<Napi::String>().Utf8Value();
}
// Optional [r, g, b] bytes.
bool rgb_bytes(const Napi::Object& o, const char* key, uint8_t out[3]) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined() || v.IsNull()) return false;
  if (!v.IsArray() || v.As<Napi::Array>().Length() != 3)
    fail(Code::InvalidArgument, std::string("image: option '") + key + "' must be [r, g, b]");
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < 3; ++i) {
    Napi::Value e = a.Get(i);
    double d = e.IsNumber() ? e.As<Napi::Number>().DoubleValue() : -1;
    if (!(d >= 0 && d <= 255) || d != double(int(d)))
      fail(Code::InvalidArgument, std::string("image: option '") + key + "' must hold integers 0..255");
    out[i] = uint8_t(d);
  }
  return true;
}

void triple(const Napi::Object& o, const char* key, float out[3]) {
  Napi::Value v = o.Get(key);
  if (!v.IsArray() || v.As<Napi::Array>().Length() != 3)
    fail(Code::InvalidArgument, std::string("image: option '") + key + "' must be an array of 3 numbers");
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < 3; ++i) {
    Napi::Value e = a.Get(i);
    if (!e.IsNumber()) fail(Code::InvalidArgument, std::string("image: option '") + key + "' must hold numbers");
    out[i] = float(e.As<Napi::Number>().DoubleValue());  // HF builds mean/std as float32 arrays
  }
}

struct Bytes {
  const void* data = nullptr;
  size_t length = 0;
};
Bytes typed_bytes(const Napi::Value& v, const char* what) {
  if (!v.IsTypedArray()) fail(Code::InvalidArgument, std::string("image: ") + what + " must be a typed array");
  Napi::TypedArray t = v.As<Napi::TypedArray>();
  Napi::ArrayBuffer ab = t.ArrayBuffer();
  Bytes b;
  b.data = static_cast<const uint8_t*>(ab.Data()) + t.ByteOffset();
  b.length = t.ByteLength();
  return b;
}

// Runs `work` on a libuv worker. Buffers it reads or writes are JS-allocated and pinned by
// references until the promise settles; the result object is built on the JS thread.
class ImageWorker : public Napi::AsyncWorker {
 public:
  using Result = std::function<Napi::Value(Napi::Env, const std::vector<Napi::ObjectReference>&)>;
  // pinned[i] is handed back to `result` as refs[i] (handles do not outlive the calling scope).
  ImageWorker(Napi::Env env, std::function<void()> work, Result result, std::vector<Napi::Value> pinned)
      : Napi::AsyncWorker(env, "tessera.image"),
        deferred_(Napi::Promise::Deferred::New(env)),
        work_(std::move(work)),
        result_(std::move(result)) {
    for (auto& v : pinned) refs_.push_back(Napi::Persistent(v.As<Napi::Object>()));
  }
  Napi::Promise promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    try {
      work_();
    } catch (const Error& e) {
      code_ = e.code();
      message_ = e.what();
    } catch (const std::bad_alloc&) {
      code_ = Code::OutOfMemory;
      message_ = "image: out of memory";
    } catch (const std::exception& e) {
      code_ = Code::Internal;
      message_ = std::string("image: ") + e.what();
    } catch (...) {
      code_ = Code::Internal;
      message_ = "image: unknown native failure";
    }
    if (!message_.empty()) SetError(message_);
  }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    deferred_.Resolve(result_(env, refs_));
  }
  void OnError(const Napi::Error&) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Error e = Napi::Error::New(env, message_);
    e.Set("code", Napi::String::New(env, code_name(code_)));
    deferred_.Reject(e.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::function<void()> work_;
  Result result_;
  std::vector<Napi::ObjectReference> refs_;
  Code code_ = Code::Internal;
  std::string message_;
};

// Wraps argument parsing so that a bad argument becomes a rejected promise, never a throw.
template <class Fn>
Napi::Value async_entry(const Napi::CallbackInfo& info, Fn&& fn) {
  Napi::Env env = info.Env();
  try {
    return fn(env);
  } catch (const Error& e) {
    return rejected(env, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return rejected(env, Code::OutOfMemory, "image: out of memory allocating the result");
  } catch (const std::exception& e) {
    return rejected(env, Code::Internal, std::string("image: ") + e.what());
  }
}

Napi::Value ImagePreprocess(const Napi::CallbackInfo& info) {
  return async_entry(info, [&](Napi::Env env) -> Napi::Value {
    if (info.Length() < 2 || !info[1].IsObject())
      fail(Code::InvalidArgument, "imagePreprocess(pixels, options): options object missing");
    Napi::Object o = info[1].As<Napi::Object>();
    Bytes px = typed_bytes(info[0], "pixels");

    PreprocessRequest r;
    r.pixels = px.data;
    r.pixel_bytes = px.length;
    r.format = image::parse_pixel_format(str(o, "format"));
    r.width = int_arg(o, "width", 1, 1 << 20);
    r.height = int_arg(o, "height", 1, 1 << 20);
    r.has_transparent_rgb = rgb_bytes(o, "transparentColor", r.transparent_rgb);
    r.target_width = int_arg(o, "targetWidth", 1, 1 << 20);
    r.target_height = int_arg(o, "targetHeight", 1, 1 << 20);
    std::string layout = str(o, "layout");
    if (layout == "qwen") r.layout = Layout::Qwen;
    else if (layout == "gemma") r.layout = Layout::Gemma;
    else fail(Code::InvalidArgument, "image: layout must be 'qwen' or 'gemma', not '" + layout + "'");
    r.patch = int_arg(o, "patch", 1, 1024);
    r.qwen.patch = r.patch;
    r.qwen.temporal = int_or(o, "temporal", 1, 64, 2);
    r.qwen.merge = int_or(o, "merge", 1, 64, 2);
    r.normalize.do_rescale = flag(o, "doRescale");
    r.normalize.rescale_factor = num(o, "rescaleFactor");
    r.normalize.do_normalize = flag(o, "doNormalize");
    triple(o, "mean", r.normalize.mean);
    triple(o, "std", r.normalize.std);
    std::string output = str(o, "output");
    if (output == "uint8") r.bytes_out = true;
    else if (output != "float32") fail(Code::InvalidArgument, "image: output must be 'float32' or 'uint8'");

    image::OutputShape shape = image::output_shape(r);  // validates sizes and buffer length
    const size_t n = shape.values();
    // Results are JS-allocated up front (zero pages until written) and written by the worker.
    Napi::ArrayBuffer values = Napi::ArrayBuffer::New(env, n * (r.bytes_out ? 1 : 4));
    Napi::ArrayBuffer positions;
    const bool gemma = r.layout == Layout::Gemma;
    if (gemma) positions = Napi::ArrayBuffer::New(env, shape.rows * 2 * sizeof(int32_t));
    if (env.IsExceptionPending()) fail(Code::OutOfMemory, "image: cannot allocate the result buffers");

    void* out = values.Data();
    int32_t* pos = gemma ? static_cast<int32_t*>(positions.Data()) : nullptr;
    std::vector<Napi::Value> pinned{info[0], values};
    if (gemma) pinned.push_back(positions);
    const bool bytes = r.bytes_out;
    auto* w = new ImageWorker(
        env, [r, out, pos] { image::run_preprocess(r, out, pos); },
        [n, bytes, gemma, rows = shape.rows, cols = shape.row_len](Napi::Env e,
                                                                  const std::vector<Napi::ObjectReference>& refs) {
          Napi::Object res = Napi::Object::New(e);
          res.Set("cols", Napi::Number::New(e, double(cols)));
          Napi::ArrayBuffer values = refs[1].Value().As<Napi::ArrayBuffer>();
          if (bytes) res.Set("pixelValues", Napi::Uint8Array::New(e, n, values, 0));
          else res.Set("pixelValues", Napi::Float32Array::New(e, n, values, 0));
          if (gemma) res.Set("positions", Napi::Int32Array::New(e, rows * 2, refs[2].Value().As<Napi::ArrayBuffer>(), 0));
          return Napi::Value(res);
        },
        pinned);
    Napi::Promise p = w->promise();
    w->Queue();
    return p;
  });
}

Napi::Value ImageResize(const Napi::CallbackInfo& info) {
  return async_entry(info, [&](Napi::Env env) -> Napi::Value {
    if (info.Length() < 5) fail(Code::InvalidArgument, "imageResize(rgb, width, height, targetWidth, targetHeight)");
    Bytes px = typed_bytes(info[0], "rgb");
    int dims[4];
    for (int i = 0; i < 4; ++i) {
      if (!info[i + 1].IsNumber()) fail(Code::InvalidArgument, "imageResize: sizes must be numbers");
      double d = info[i + 1].As<Napi::Number>().DoubleValue();
      if (!(d >= 1 && d <= (1 << 20)) || d != double(int(d)))
        fail(Code::InvalidArgument, "imageResize: sizes must be integers in [1, 2^20]");
      dims[i] = int(d);
    }
    const size_t need = size_t(dims[0]) * dims[1] * 3;
    if (px.length != need)
      fail(Code::InvalidArgument, "imageResize: rgb holds " + std::to_string(px.length) + " bytes, expected " +
                                      std::to_string(need));
    const size_t n = size_t(dims[2]) * dims[3] * 3;
    Napi::ArrayBuffer out = Napi::ArrayBuffer::New(env, n);
    if (env.IsExceptionPending()) fail(Code::OutOfMemory, "image: cannot allocate the result buffer");
    uint8_t* dst = static_cast<uint8_t*>(out.Data());
    const void* src = px.data;
    auto* w = new ImageWorker(
        env,
        [src, dims0 = dims[0], dims1 = dims[1], dims2 = dims[2], dims3 = dims[3], dst] {
          image::resize_bicubic_rgb8(static_cast<const uint8_t*>(src), dims0, dims1, dst, dims2, dims3, nullptr);
        },
        [n](Napi::Env e, const std::vector<Napi::ObjectReference>& refs) -> Napi::Value {
          return Napi::Uint8Array::New(e, n, refs[1].Value().As<Napi::ArrayBuffer>(), 0);
        },
        {info[0], out});
    Napi::Promise p = w->promise();
    w->Queue();
    return p;
  });
}

Napi::Value ImageToRgb(const Napi::CallbackInfo& info) {
  return async_entry(info, [&](Napi::Env env) -> Napi::Value {
    if (info.Length() < 2 || !info[1].IsObject()) fail(Code::InvalidArgument, "imageToRgb(pixels, { width, height, format })");
    Napi::Object o = info[1].As<Napi::Object>();
    Bytes px = typed_bytes(info[0], "pixels");
    const image::PixelFormat f = image::parse_pixel_format(str(o, "format"));
    const int w = int_arg(o, "width", 1, 1 << 20), h = int_arg(o, "height", 1, 1 << 20);
    std::array<uint8_t, 3> key{};
    const bool has_key = rgb_bytes(o, "transparentColor", key.data());
    const size_t need = size_t(w) * h * image::channels_of(f) * image::bytes_per_sample(f);
    if (px.length != need)
      fail(Code::InvalidArgument, "imageToRgb: pixels hold " + std::to_string(px.length) + " bytes, expected " +
                                      std::to_string(need));
    const size_t n = size_t(w) * h * 3;
    Napi::ArrayBuffer out = Napi::ArrayBuffer::New(env, n);
    if (env.IsExceptionPending()) fail(Code::OutOfMemory, "image: cannot allocate the result buffer");
    uint8_t* dst = static_cast<uint8_t*>(out.Data());
    const void* src = px.data;
    auto* wk = new ImageWorker(
        env, [src, f, w, h, dst, key, has_key] { image::to_rgb8(src, f, w, h, dst, nullptr, has_key ? key.data() : nullptr); },
        [n](Napi::Env e, const std::vector<Napi::ObjectReference>& refs) -> Napi::Value {
          return Napi::Uint8Array::New(e, n, refs[1].Value().As<Napi::ArrayBuffer>(), 0);
        },
        {info[0], out});
    Napi::Promise p = wk->promise();
    wk->Queue();
    return p;
  });
}

}  // namespace

void RegisterImage(Napi::Env env, Napi::Object exports) {
  exports.Set("imagePreprocess", Napi::Function::New(env, ImagePreprocess, "imagePreprocess"));
  exports.Set("imageResize", Napi::Function::New(env, ImageResize, "imageResize"));
  exports.Set("imageToRgb", Napi::Function::New(env, ImageToRgb, "imageToRgb"));
}

}  // namespace tessera::addon
