// Helpers shared by the MSL kernels (inlined into each file for newLibraryWithSource:).
#pragma once
#include <metal_stdlib>
#include "shared/args.h"
using namespace metal;

// The online softmax's "no score yet" (a running maximum before the first key, a lane with no key). Every
// library is compiled with fast math (native/metal/device.mm), under which the compiler may assume that no
// value is infinite or NaN, so -INFINITY cannot stand for it: a finite value far below any score, half of
// -FLT_MAX so that the difference of two of them cannot overflow (llama.cpp's flash attention uses the same).
// exp(kNoScore - m) is 0 for every score m a tower produces. No kernel uses INFINITY, NAN, isinf or isnan
// (tools/mslemu/lint.mjs refuses them in metal/).
constant constexpr float kNoScore = -FLT_MAX / 2;

// Widen one stored weight element to float. bf16 is the top half of an f32: widened by a shift.
inline float widen(device const float* w, uint i) { return w[i]; }
inline float widen(device const half* w, uint i) { return float(w[i]); }
inline float widen(device const ushort* w, uint i) { return as_type<float>(uint(w[i]) << 16); }

// Element i of a vector stored as any WeightType (norm weights, biases, tables: small, so one branch).
inline float load_any(device const uchar* p, uint type, uint i) {
    if (type == kargs::kF16) return widen(reinterpret_cast<device const half*>(p), i);
    if (type == kargs::kBF16) return widen(reinterpret_cast<device const ushort*>(p), i);
    return widen(reinterpret_cast<device const float*>(p), i);
}

// erf with |error| < 1.5e-7 (Abramowitz & Stegun 7.1.26): MSL has no erf.
inline float erf_approx(float x) {
    const float a = fabs(x);
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
    const float y = 1.0f - poly * precise::exp(-a * a);
    return x < 0.0f ? -y : y;
}
// GELU, tanh approximation (precise::tanh: fast tanh is not accurate enough for large inputs) and exact erf form.
inline float gelu_tanh(float x) { return 0.5f * x * (1.0f + precise::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); }
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_approx(x * 0.7071067811865476f)); }
// x · sigmoid(z) = x / (1 + e^(-z)): SiLU (z = x) and QuickGELU (z = 1.702 x). e^(-z) is capped at e^88, so that
// no value is infinite (fast math): below z = -88 the result is x · 6e-39 instead of x · e^z, both negligible.
inline float x_sigmoid(float x, float z) { return x / (1.0f + precise::exp(min(-z, 88.0f))); }
inline float activate(uint act, float v) {
    if (act == kargs::kGeluTanh) return gelu_tanh(v);
    if (act == kargs::kGeluErf) return gelu_erf(v);
    if (act == kargs::kQuickGelu) return x_sigmoid(v, 1.702f * v);
    if (act == kargs::kSilu) return x_sigmoid(v, v);
    return v;
}
