// N-API bindings for the residency formulas (native/io): registered by addon.cc.
#pragma once
#include <napi.h>

namespace tessera::addon {

// Adds to exports:
//   weightMemory(spec, slots) -> { resident, slot, stream, fileBytes }
//     bytes each residency holds of the weights itself (io/weight_store_factory.h), computed by
//     the allocators' own formulas; synchronous and cheap (no file is opened).
void RegisterResidency(Napi::Env env, Napi::Object exports);

}  // namespace tessera::addon
