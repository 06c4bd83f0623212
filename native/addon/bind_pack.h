// N-API bindings `tessera pack` needs from native code: registered by addon.cc.
#pragma once
#include <napi.h>

namespace tessera::addon {

// Adds to exports:
//   convertDtype(src: Uint8Array, from: 'f32'|'f16'|'bf16', to: 'f32'|'f16'|'bf16') -> Uint8Array
//     element-wise conversion with common/dtype.h's conversions (round to nearest even), so a
//     packed folder holds exactly what the kernels would compute from; result in a JS buffer.
void RegisterPack(Napi::Env env, Napi::Object exports);

}  // namespace tessera::addon
