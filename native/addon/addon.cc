// Module entry: each area registers its own bindings. Context-aware (NODE_API_MODULE with
// instance data), so the addon loads in worker_threads and Electron's processes.
#include <napi.h>

#include "addon/bind_backends.h"
#include "addon/bind_image.h"
#include "addon/bind_pack.h"
#include "addon/bind_residency.h"
#include "addon/tower_wrap.h"

namespace tessera::addon {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  RegisterTower(env, exports);
  RegisterImage(env, exports);
  RegisterResidency(env, exports);
  RegisterPack(env, exports);
  RegisterBackends(env, exports);
  return exports;
}

}  // namespace tessera::addon

static Napi::Object InitTessera(Napi::Env env, Napi::Object exports) { return tessera::addon::Init(env, exports); }

NODE_API_MODULE(tessera, InitTessera)
