#pragma once
#include <napi.h>

namespace tessera::addon {
void RegisterTower(Napi::Env env, Napi::Object exports);
}
