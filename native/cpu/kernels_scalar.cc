// Portable kernels: the generic bodies over a one-lane "vector" (plain float), compiled for the
// baseline ISA. The fallback on machines without AVX2 or NEON.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels.h"

namespace tessera::cpu {
namespace {

struct V1 {
  using R = float;
  static constexpr int L = 1, kAcc = 24, kAttnNvk = 8, kAttnBk = 8, kAttnPvNv = 8;
  static constexpr bool kBf16Pairs = false;
  static constexpr bool kFmaLane = false;
  static R zero() { return 0.0f; }
  static R set1(float v) { return v; }
  static R load(const float* p) { return *p; }
  static void store(float* p, R v) { *p = v; }
  static R loadn(const float* p, int n) { return n > 0 ? *p : 0.0f; }
  static void storen(float* p, R v, int n) {
    if (n > 0) *p = v;
  }
  static R add(R a, R b) { return a + b; }
  static R sub(R a, R b) { return a - b; }
  static R mul(R a, R b) { return a * b; }
  static R div(R a, R b) { return a / b; }
  static R fma(R a, R b, R c) { return a * b + c; }
  static R max(R a, R b) { return a > b ? a : b; }  // as x86 maxps: NaN in b propagates
  static R min(R a, R b) { return a < b ? a : b; }
  static float hsum(R v) { return v; }
  static float hmax(R v) { return v; }
  static float first(R v) { return v; }
  static R round(R v) { return __builtin_nearbyintf(v); }
  static R pow2i(R n) {
    uint32_t bits = uint32_t(int32_t(n) + 127) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static R lt_select(R a, R b, R x, R y) { return a < b ? x : y; }
  static R load_bf16(const uint16_t* p) { return bf16_to_f32(*p); }
  static R load_f16(const uint16_t* p) { return f16_to_f32(*p); }
  static void store_hi16(uint16_t* p, R v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    *p = uint16_t(bits >> 16);
  }
  static void transpose(R*) {}  // 1 x 1
};

#include "cpu/kernels_generic.inc"

constexpr int kMr = 4, kNv = 16;  // 4 x 16 tile the compiler may vectorise for the baseline ISA
const Kernels kTable{
    .level = Simd::Scalar,
    .mr = kMr,
    .nr = kNv * V1::L,
    .gemm_micro = gemm_micros<V1, kMr, kNv>(),
    .gemm_tail = gemm_tails<V1, kMr, kNv>(),
    .pack_b = pack_b_transposed<V1>,
    .pack_a = pack_a_transposed<V1>,
    .epilogue = epilogue_t<V1>,
    .layer_norm_row = layer_norm_row_t<V1>,
    .rms_norm_row = rms_norm_row_t<V1>,
    .rope_row = rope_row_t<V1>,
    .attention = {.run = attention_task_t<V1>, .scratch = attention_scratch_t<V1>, .query_block = AttnShape<V1>::BQ},
};

}  // namespace

const Kernels* scalar_kernels() { return &kTable; }

}  // namespace tessera::cpu
