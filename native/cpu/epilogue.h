// The fused tail of linear() (and the whole of activation()): bias, output clamp, activation,
// multiplier, residual, in the order of backend::LinearArgs. The vector bodies are epilogue_t in
// kernels_generic.inc.
#pragma once

#include "backend/backend.h"

namespace tessera::cpu {

struct Epilogue {
  backend::Act act = backend::Act::None;
  bool clamp_out = false;
  float lo = 0, hi = 0;
};

}  // namespace tessera::cpu
