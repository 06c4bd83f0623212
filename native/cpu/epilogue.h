// The fused tail of linear() (and the whole of activation()): bias, output clamp, activation,
// residual, in the order of gpu::LinearArgs. One definition for every GEMM path.
#pragma once
#include <cstdint>

#include "cpu/gelu.h"
#include "gpu/backend.h"

namespace tessera::cpu {

struct Epilogue {
  gpu::Act act = gpu::Act::None;
  bool clamp_out = false;
  float lo = 0, hi = 0;
};

inline float apply_act(gpu::Act act, float v) {
  switch (act) {
    case gpu::Act::None: return v;
    case gpu::Act::GeluTanh: return gelu_tanh(v);
    case gpu::Act::GeluErf: return gelu_erf(v);
  }
  return v;
}

// y[j] = act(clamp(acc[j] + bias[j])) + res[j] for j < n; bias/res may be null; res may be y.
inline void epilogue_row(float* y, const float* acc, int64_t n, const float* bias, const float* res, const Epilogue& e) {
  for (int64_t j = 0; j < n; ++j) {
    float v = acc[j];
    if (bias) v += bias[j];
    if (e.clamp_out) v = v < e.lo ? e.lo : (v > e.hi ? e.hi : v);
    v = apply_act(e.act, v);
    if (res) v += res[j];
    y[j] = v;
  }
}

}  // namespace tessera::cpu
