#include "addon/bind_backends.h"

#include <string>

#include "metal/capability.h"
#include "metal/device.h"
#include "metal/emu_executor.h"
#include "sources.gen.h"  // build/metal: the kernel sources' stamp (scripts/msl-kernels.mjs)

namespace tessera::addon {
namespace {

Napi::Value MetalGpu(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  mtl::GpuCaps caps;
  std::string why;
  if (!mtl::metal_gpu(&caps, &why)) {
    o.Set("available", false);
    o.Set("reason", why);
    return o;
  }
  o.Set("available", true);
  o.Set("name", caps.name);
  o.Set("appleFamily", caps.apple_family);
  o.Set("metal3", caps.metal3);
  o.Set("maxThreadgroupMemory", double(caps.max_tg_memory));
  o.Set("workingSetBytes", double(caps.working_set));
  o.Set("kernelsThreadgroupMemory", double(mtl::kernels_threadgroup_bytes()));
  o.Set("missing", mtl::missing_capabilities(caps));
  return o;
}

Napi::Value MetalEmulator(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string where;
  const bool ok = mtl::emulator_available(&where);
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", ok);
  o.Set(ok ? "library" : "reason", where);
  return o;
}

}  // namespace

void RegisterBackends(Napi::Env env, Napi::Object exports) {
  exports.Set("metalGpu", Napi::Function::New(env, MetalGpu, "metalGpu"));
  exports.Set("metalEmulator", Napi::Function::New(env, MetalEmulator, "metalEmulator"));
  exports.Set("kernelsStamp", Napi::String::New(env, mtl::gen::kStampKernel));
}

}  // namespace tessera::addon
