#include "addon/bind_pack.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "addon/js_convert.h"
#include "common/dtype.h"
#include "io/weight_alignment.h"

namespace tessera::addon {
namespace {

Napi::Value ConvertDtype(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (info.Length() < 3 || !info[0].IsTypedArray() || !info[1].IsString() || !info[2].IsString())
      fail(Code::InvalidArgument, "convertDtype(src: Uint8Array, from, to)");
    auto src = info[0].As<Napi::Uint8Array>();
    DType from, to;
    std::string fs = info[1].As<Napi::String>().Utf8Value(), ts = info[2].As<Napi::String>().Utf8Value();
    if (!parse_dtype(fs, &from)) fail(Code::InvalidArgument, "convertDtype: unknown dtype '" + fs + "'");
    if (!parse_dtype(ts, &to)) fail(Code::InvalidArgument, "convertDtype: unknown dtype '" + ts + "'");
    if (dtype_quantised(to)) fail(Code::InvalidArgument, "convertDtype: cannot convert to " + ts + " (a stored type only)");
    size_t bytes = src.ByteLength();
    // Elements come in units: one element, or one block of a quantised type.
    const size_t unit = dtype_quantised(from) ? kQ8_0Block : 1;
    uint64_t unit_bytes = 0;
    dtype_bytes(from, unit, &unit_bytes);
    if (bytes % unit_bytes) fail(Code::InvalidArgument, "convertDtype: byte length is not a whole number of " + fs);
    size_t n = bytes / unit_bytes * unit;
    Napi::Uint8Array out = Napi::Uint8Array::New(env, n * dtype_size(to));
    const uint8_t* in = src.Data();
    uint8_t* dst = out.Data();
    std::vector<float> tmp(std::min<size_t>(n, 1 << 16));  // a multiple of the unit (or all of n)
    for (size_t i = 0; i < n; i += tmp.size()) {  // in chunks: no second full-size copy
      size_t m = std::min(tmp.size(), n - i);
      widen_to_f32(in + i / unit * unit_bytes, from, tmp.data(), m);
      for (size_t j = 0; j < m; ++j) {
        uint8_t* d = dst + (i + j) * dtype_size(to);
        if (to == DType::F32) {
          std::memcpy(d, &tmp[j], 4);
        } else {
          uint16_t h = to == DType::BF16 ? f32_to_bf16(tmp[j]) : f32_to_f16(tmp[j]);
          std::memcpy(d, &h, 2);
        }
      }
    }
    return out;
  });
}

}  // namespace

void RegisterPack(Napi::Env env, Napi::Object exports) {
  exports.Set("convertDtype", Napi::Function::New(env, ConvertDtype));
  Napi::Object alignment = Napi::Object::New(env);
  alignment.Set("stage", Napi::Number::New(env, double(kStageAlignment)));
  alignment.Set("tensor", Napi::Number::New(env, double(kTensorAlignment)));
  exports.Set("weightAlignment", alignment);
}

}  // namespace tessera::addon
