// The N-API face of a tower: openTower(spec, options) → Promise<NativeTower>; NativeTower has
// encode(...) → Promise, sizing(patches), stats(), close() and patchWidth. Work runs in AsyncWorkers (off the
// JS thread); every exception is caught and becomes a rejection with a `.code`. Results are
// copied into JS-allocated typed arrays (never external buffers: Electron's memory cage).
#include <napi.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>

#include "addon/js_convert.h"
#include "addon/tower_core.h"
#include "addon/tower_wrap.h"
#include "common/cpu_features.h"

namespace tessera::addon {
namespace {

// A coded failure captured on the worker thread, rethrown as a JS error on the main thread.
struct Failure {
  Code code = Code::Internal;
  std::string message;
  bool set = false;
  void capture(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      *this = {e.code(), e.what(), true};
    } catch (const std::bad_alloc&) {
      *this = {Code::OutOfMemory, "out of memory", true};
    } catch (const std::exception& e) {
      *this = {Code::Internal, e.what(), true};
    }
  }
};

class NativeTower : public Napi::ObjectWrap<NativeTower> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit NativeTower(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeTower>(info) {}
  std::shared_ptr<TowerCore> core;

 private:
  Napi::Value Encode(const Napi::CallbackInfo& info);
  Napi::Value Sizing(const Napi::CallbackInfo& info);
  Napi::Value PatchWidth(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
};

class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, std::shared_ptr<TowerCore> core)
      : Napi::AsyncWorker(env), core_(std::move(core)), deferred_(Napi::Promise::Deferred::New(env)) {}
  Napi::Promise promise() { return deferred_.Promise(); }
  void Execute() override { failure_.capture([&] { core_->open(); }); }
  void OnOK() override {
    Napi::Env env = Env();
    if (failure_.set) {
      deferred_.Reject(coded_error(env, failure_.code, failure_.message).Value());
      return;
    }
    Napi::Object obj = env.GetInstanceData<Napi::FunctionReference>()->New({});
    NativeTower::Unwrap(obj)->core = core_;
    deferred_.Resolve(obj);
  }

 private:
  std::shared_ptr<TowerCore> core_;
  Napi::Promise::Deferred deferred_;
  Failure failure_;
};

struct ProgressEvent {
  int done, total;
  double ms;  // wall time of the stage just done (weights wait + compute + checks)
};

// An encode call's arguments, checked on the JS thread before any worker exists (a worker owns a
// thread-safe function whose teardown must not race a half-built worker's deletion).
struct EncodeArgs {
  PixelInput input;
  EncodeControl control;
  const int32_t* cancel_flag = nullptr;
  Napi::Object keep;  // the JS typed arrays the worker reads, kept alive while it runs
  Napi::Function on_progress;
};

class EncodeWorker : public Napi::AsyncProgressQueueWorker<ProgressEvent> {
 public:
  EncodeWorker(Napi::Env env, std::shared_ptr<TowerCore> core, EncodeArgs args)
      : Napi::AsyncProgressQueueWorker<ProgressEvent>(env),
        input(std::move(args.input)),
        control(std::move(args.control)),
        cancel_flag(args.cancel_flag),
        keep_alive(Napi::Persistent(args.keep)),
        core_(std::move(core)),
        deferred_(Napi::Promise::Deferred::New(env)) {
    if (!args.on_progress.IsEmpty()) on_progress = Napi::Persistent(args.on_progress);
  }

  Napi::Promise promise() { return deferred_.Promise(); }
  PixelInput input;
  EncodeControl control;
  const int32_t* cancel_flag = nullptr;
  Napi::ObjectReference keep_alive;
  Napi::FunctionReference on_progress;

  void Execute(const ExecutionProgress& progress) override {
    failure_.capture([&] {
      std::lock_guard<std::mutex> lock(core_->mu);
      if (core_->closed) fail(Code::Closed, "the tower is closed");
      const int32_t* flag = cancel_flag;
      control.cancelled = [flag] { return flag && __atomic_load_n(flag, __ATOMIC_RELAXED) != 0; };
      auto last = std::chrono::steady_clock::now();
      control.progress = [&progress, &last](int done, int total) {
        auto now = std::chrono::steady_clock::now();
        ProgressEvent e{done, total, std::chrono::duration<double, std::milli>(now - last).count()};
        last = now;
        progress.Send(&e, 1);
      };
      core_->model->encode(input, control, out_);
    });
  }

  void OnProgress(const ProgressEvent* events, size_t count) override {
    if (on_progress.IsEmpty()) return;
    Napi::Env env = Env();
    for (size_t i = 0; i < count; ++i) {
      Napi::Object e = Napi::Object::New(env);
      e.Set("block", events[i].done);
      e.Set("blocks", events[i].total);
      e.Set("ms", events[i].ms);
      on_progress.Call({e});
      if (env.IsExceptionPending()) env.GetAndClearPendingException();  // a throwing callback must not kill the encode
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (failure_.set) {
      deferred_.Reject(coded_error(env, failure_.code, failure_.message).Value());
      return;
    }
    Napi::Object r = Napi::Object::New(env);
    r.Set("embeddings", copy(env, out_.embeddings));
    r.Set("tokens", Napi::Number::New(env, double(out_.tokens)));
    r.Set("width", Napi::Number::New(env, double(out_.width)));
    Napi::Array ds = Napi::Array::New(env, out_.deepstack.size());
    for (size_t i = 0; i < out_.deepstack.size(); ++i) ds.Set(uint32_t(i), copy(env, out_.deepstack[i]));
    r.Set("deepstack", ds);
    Napi::Array stages = Napi::Array::New(env, out_.stages.size());
    for (size_t i = 0; i < out_.stages.size(); ++i) {
      Napi::Object s = Napi::Object::New(env);
      s.Set("name", out_.stages[i].name);
      s.Set("kind", row_kind_name(out_.stages[i].kind));
      s.Set("rows", Napi::Number::New(env, double(out_.stages[i].rows)));
      s.Set("cols", Napi::Number::New(env, double(out_.stages[i].cols)));
      s.Set("data", copy(env, out_.stages[i].data));
      stages.Set(uint32_t(i), s);
    }
    r.Set("stages", stages);
    deferred_.Resolve(r);
  }

 private:
  static Napi::Float32Array copy(Napi::Env env, const HostFloats& v) {
    Napi::Float32Array a = Napi::Float32Array::New(env, v.size());
    if (!v.empty()) std::memcpy(a.Data(), v.data(), v.size() * 4);
    return a;
  }
  std::shared_ptr<TowerCore> core_;
  Napi::Promise::Deferred deferred_;
  Failure failure_;
  EncodeOutput out_;
};

Napi::Function NativeTower::Define(Napi::Env env) {
  Napi::Function f = DefineClass(env, "NativeTower",
                                 {InstanceMethod("encode", &NativeTower::Encode),
                                  InstanceMethod("sizing", &NativeTower::Sizing),
                                  InstanceAccessor("patchWidth", &NativeTower::PatchWidth, nullptr),
                                  InstanceMethod("stats", &NativeTower::Stats),
                                  InstanceMethod("close", &NativeTower::Close)});
  // Per-environment (worker_threads, Electron processes): the addon's one instance-data slot.
  env.SetInstanceData<Napi::FunctionReference>(new Napi::FunctionReference(Napi::Persistent(f)));
  return f;
}

static EncodeArgs parse_encode_args(Napi::Env env, const Napi::Object& a) {
  EncodeArgs args;
  args.keep = Napi::Object::New(env);
  Napi::Value pixels = a.Get("pixels");
  if (!pixels.IsTypedArray() || pixels.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
    fail(Code::InvalidArgument, "pixelValues must be a Float32Array");
  Napi::Float32Array px = pixels.As<Napi::Float32Array>();
  args.keep.Set("pixels", px);
  double cols = a.Get("cols").IsNumber() ? a.Get("cols").As<Napi::Number>().DoubleValue() : 0;
  if (!(cols >= 1 && cols < 1e9) || px.ElementLength() % size_t(cols) != 0)
    fail(Code::InvalidArgument, "pixelValues length " + std::to_string(px.ElementLength()) +
                                    " is not a whole number of rows of " + std::to_string(int64_t(cols)));
  args.input.pixels = px.Data();
  args.input.cols = int64_t(cols);
  args.input.rows = int64_t(px.ElementLength() / size_t(cols));
  auto int32_array = [](const Napi::Value& v) {
    return v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array;
  };
  Napi::Value grids = a.Get("grids");
  if (!grids.IsUndefined()) {
    if (!int32_array(grids) || grids.As<Napi::Int32Array>().ElementLength() % 3)
      fail(Code::InvalidArgument, "grid must be an Int32Array of (t, h, w) triples");
    Napi::Int32Array g = grids.As<Napi::Int32Array>();
    for (size_t i = 0; i < g.ElementLength(); i += 3) args.input.grids.push_back({g[i], g[i + 1], g[i + 2]});
  }
  Napi::Value positions = a.Get("positions");
  if (!positions.IsUndefined()) {
    if (!int32_array(positions) || positions.As<Napi::Int32Array>().ElementLength() != size_t(args.input.rows) * 2)
      fail(Code::InvalidArgument, "positions must be an Int32Array of (x, y) per patch row");
    Napi::Int32Array p = positions.As<Napi::Int32Array>();
    args.keep.Set("positions", p);
    args.input.positions = p.Data();
  }
  Napi::Value image_rows = a.Get("imageRows");
  if (image_rows.IsArray()) {
    Napi::Array r = image_rows.As<Napi::Array>();
    for (uint32_t i = 0; i < r.Length(); ++i) {
      Napi::Value v = r.Get(i);
      if (!v.IsNumber()) fail(Code::InvalidArgument, "imageRows must hold row counts");
      args.input.image_rows.push_back(v.As<Napi::Number>().Int64Value());
    }
  }
  args.control.keep_stages = a.Get("stages").ToBoolean();
  args.control.check_finite = !a.Get("checkFinite").IsBoolean() || a.Get("checkFinite").ToBoolean();
  Napi::Value cancel = a.Get("cancel");
  if (!cancel.IsUndefined()) {
    if (!int32_array(cancel) || cancel.As<Napi::Int32Array>().ElementLength() < 1)
      fail(Code::InvalidArgument, "cancel must be an Int32Array(1)");
    Napi::Int32Array c = cancel.As<Napi::Int32Array>();
    args.keep.Set("cancel", c);
    args.cancel_flag = c.Data();
  }
  Napi::Value progress = a.Get("onProgress");
  if (progress.IsFunction()) args.on_progress = progress.As<Napi::Function>();
  return args;
}

// encode({ pixels: Float32Array, cols, grids?: Int32Array (t,h,w)*, positions?: Int32Array,
//          imageRows?: number[], stages: bool, checkFinite: bool, cancel?: Int32Array(1),
//          onProgress?: fn }) → Promise
Napi::Value NativeTower::Encode(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (!core || core->closed) fail(Code::Closed, "the tower is closed");
    if (info.Length() < 1 || !info[0].IsObject()) fail(Code::InvalidArgument, "encode expects an options object");
    auto* w = new EncodeWorker(env, core, parse_encode_args(env, info[0].As<Napi::Object>()));
    Napi::Promise promise = w->promise();
    w->Queue();
    return promise;
  });
}

// sizing(patches) → { patchWidth, tokens, width, scratchBytes, ioBytes } for one encode of that
// many patch rows of whole images (VisionModel::sizing).
Napi::Value NativeTower::Sizing(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (!core || core->closed) fail(Code::Closed, "the tower is closed");
    if (info.Length() < 1 || !info[0].IsNumber()) fail(Code::InvalidArgument, "sizing expects a patch-row count");
    const int64_t patches = info[0].As<Napi::Number>().Int64Value();
    if (patches < 0) fail(Code::InvalidArgument, "patch-row count must be >= 0");
    const tessera::Sizing s = core->model->sizing(patches);
    Napi::Object o = Napi::Object::New(env);
    o.Set("patchWidth", Napi::Number::New(env, double(s.patch_width)));
    o.Set("tokens", Napi::Number::New(env, double(s.tokens)));
    o.Set("width", Napi::Number::New(env, double(s.width)));
    o.Set("scratchBytes", Napi::Number::New(env, double(s.scratch_bytes)));
    o.Set("ioBytes", Napi::Number::New(env, double(s.io_bytes)));
    return o;
  });
}

Napi::Value NativeTower::PatchWidth(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (!core || core->closed) fail(Code::Closed, "the tower is closed");
    return Napi::Number::New(env, double(core->model->patch_width()));
  });
}

Napi::Value NativeTower::Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (!core || core->closed) fail(Code::Closed, "the tower is closed");
    WeightStoreStats s = core->store->stats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("bytesRead", Napi::Number::New(env, double(s.bytes_read)));
    o.Set("residentBytes", Napi::Number::New(env, double(s.resident_bytes)));
    o.Set("reads", Napi::Number::New(env, double(s.reads)));
    o.Set("violations", Napi::Number::New(env, double(s.violations)));
    o.Set("packedWeights", Napi::Number::New(env, double(s.packed)));
    o.Set("residency", core->store->residency());
    o.Set("backend", core->backend->name());
    o.Set("precision", core->backend->precision());
    return o;
  });
}

// Frees the tower. TS calls it only once nothing is in flight; the core's lock covers a race.
Napi::Value NativeTower::Close(const Napi::CallbackInfo& info) {
  if (core) core->close();
  core.reset();
  return info.Env().Undefined();
}

// openTower(spec, { backend, residency, threads, slots, precision }) → Promise<NativeTower>
Napi::Value OpenTower(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsObject())
      fail(Code::InvalidArgument, "openTower(spec, options)");
    auto core = std::make_shared<TowerCore>();
    core->spec = spec_from_js(info[0].As<Napi::Object>());
    Napi::Object o = info[1].As<Napi::Object>();
    if (o.Get("backend").IsString()) core->options.backend = o.Get("backend").As<Napi::String>().Utf8Value();
    if (o.Get("residency").IsString()) core->options.residency = o.Get("residency").As<Napi::String>().Utf8Value();
    if (o.Get("threads").IsNumber()) core->options.threads = o.Get("threads").As<Napi::Number>().Int32Value();
    if (o.Get("slots").IsNumber()) core->options.slots = o.Get("slots").As<Napi::Number>().Int32Value();
    if (o.Get("precision").IsString()) core->options.precision = o.Get("precision").As<Napi::String>().Utf8Value();
    auto* w = new OpenWorker(env, core);
    Napi::Promise p = w->promise();
    w->Queue();
    return p;
  });
}

}  // namespace

void RegisterTower(Napi::Env env, Napi::Object exports) {
  exports.Set("NativeTower", NativeTower::Define(env));
  exports.Set("openTower", Napi::Function::New(env, OpenTower));
  exports.Set("simdLevel", Napi::String::New(env, simd_level()));
  exports.Set("bf16Widening", Napi::String::New(env, bf16_widening()));
  Napi::Array codes = Napi::Array::New(env, kCodeCount);
  for (int i = 0; i < kCodeCount; i++) codes.Set(uint32_t(i), code_name(static_cast<Code>(i)));
  exports.Set("errorCodes", codes);
  exports.Set("bf16Level", Napi::String::New(env, bf16_level()));
  Napi::Array precisions = Napi::Array::New(env, std::size(kPrecisions));
  for (size_t i = 0; i < std::size(kPrecisions); i++) precisions.Set(uint32_t(i), kPrecisions[i]);
  exports.Set("precisions", precisions);
}

}  // namespace tessera::addon
