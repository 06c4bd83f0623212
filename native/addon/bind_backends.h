// N-API bindings that describe the backends this build can run (tessera doctor): registered by addon.cc.
#pragma once
#include <napi.h>

namespace tessera::addon {

// Adds to exports:
//   metalGpu() -> { available: false, reason } | { available: true, name, appleFamily, metal3,
//     maxThreadgroupMemory, workingSetBytes, kernelsThreadgroupMemory, missing }
//     the system's Metal GPU as the Metal backend sees it, and what it lacks for the kernels ("" if nothing;
//     native/metal/capability.h). Never throws: off macOS, available is false with the reason.
//   metalEmulator() -> { available, reason }  whether backend 'metal-emulated' can load its library.
//   kernelsStamp: string  the name of the stamp kernel of the MSL sources built in (scripts/msl-kernels.mjs):
//     what the cost model's shipped counts must have been counted from (tessera doctor)
void RegisterBackends(Napi::Env env, Napi::Object exports);

}  // namespace tessera::addon
