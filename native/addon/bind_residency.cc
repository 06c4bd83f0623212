#include "addon/bind_residency.h"

#include "addon/js_convert.h"
#include "io/weight_store_factory.h"

namespace tessera::addon {
namespace {

Napi::Value WeightMemoryJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsNumber())
      fail(Code::InvalidArgument, "weightMemory(spec, slots)");
    TowerSpec spec = spec_from_js(info[0].As<Napi::Object>());
    int slots = info[1].As<Napi::Number>().Int32Value();
    if (slots < 1) fail(Code::InvalidArgument, "slots must be >= 1");
    WeightMemory m = weight_memory(spec, slots);
    Napi::Object o = Napi::Object::New(env);
    o.Set("resident", Napi::Number::New(env, double(m.resident)));
    o.Set("slot", Napi::Number::New(env, double(m.slot)));
    o.Set("stream", Napi::Number::New(env, double(m.stream)));
    o.Set("fileBytes", Napi::Number::New(env, double(m.file_bytes)));
    o.Set("mapped", Napi::Number::New(env, double(m.mapped)));
    return o;
  });
}

}  // namespace

void RegisterResidency(Napi::Env env, Napi::Object exports) {
  exports.Set("weightMemory", Napi::Function::New(env, WeightMemoryJs));
}

}  // namespace tessera::addon
