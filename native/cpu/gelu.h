// The one definition of the two GELUs (scalar reference forms; SIMD kernels approximate tanh/erf
// to within float rounding and are tested against these).
#pragma once
#include <cmath>

namespace tessera::cpu {

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): hidden_act "gelu_pytorch_tanh".
inline float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

// 0.5 x (1 + erf(x / sqrt(2))): nn.GELU() default.
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

}  // namespace tessera::cpu
