// Conversions between JS values and native structs, all with argument checks that throw
// tessera::Error(ERR_INVALID_ARGUMENT) — caught by the caller before anything reaches JS.
#pragma once
#include <napi.h>

#include <string>

#include "common/error.h"
#include "io/tower_spec.h"

namespace tessera::addon {

TowerSpec spec_from_js(const Napi::Object& obj);

// A JS Error with `.code` set to the coded error's string: what src/errors.ts turns into a
// TesseraError. Used for every rejection and every synchronous failure of the addon.
Napi::Error coded_error(Napi::Env env, Code code, const std::string& message);

// Runs fn and converts any exception into a thrown coded JS error (returns undefined then).
template <class Fn>
Napi::Value guarded(Napi::Env env, Fn&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    coded_error(env, e.code(), e.what()).ThrowAsJavaScriptException();
  } catch (const std::bad_alloc&) {
    coded_error(env, Code::OutOfMemory, "out of memory").ThrowAsJavaScriptException();
  } catch (const std::exception& e) {
    coded_error(env, Code::Internal, e.what()).ThrowAsJavaScriptException();
  }
  return env.Undefined();
}

}  // namespace tessera::addon
