// arm64 NEON kernels: 4 lanes, 32 registers (NEON is part of every arm64 CPU, so no target
// attribute is needed). See kernels_avx512.cc for the scheme.
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>

namespace tessera::cpu {
namespace {

struct V128 {
  using R = float32x4_t;
  // kAcc 16 for attention's tiles: with 24, the Q·Kᵀ tile (6 rows x 4 vectors + 4 key vectors + 6
  // broadcasts) and the P·V tile need more than the 32 registers and spill to the stack.
  static constexpr int L = 4, kAcc = 16, kAttnNvk = 4, kAttnBk = 16, kAttnPvNv = 8;
  static constexpr bool kBf16Pairs = false;  // one widening instruction per vector already
  static constexpr bool kFmaLane = true;
  static R fma_lane(R b, R a, int lane, R c) {  // lane is a constant once the GEMM's loops unroll
    switch (lane) {
      case 0: return vfmaq_laneq_f32(c, b, a, 0);
      case 1: return vfmaq_laneq_f32(c, b, a, 1);
      case 2: return vfmaq_laneq_f32(c, b, a, 2);
      default: return vfmaq_laneq_f32(c, b, a, 3);
    }
  }
  static R zero() { return vdupq_n_f32(0.0f); }
  static R set1(float v) { return vdupq_n_f32(v); }
  static R load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, R v) { vst1q_f32(p, v); }
  static R loadn(const float* p, int n) {
    float t[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; ++i) t[i] = p[i];
    return vld1q_f32(t);
  }
  static void storen(float* p, R v, int n) {
    float t[4];
    vst1q_f32(t, v);
    for (int i = 0; i < n; ++i) p[i] = t[i];
  }
  static R add(R a, R b) { return vaddq_f32(a, b); }
  static R sub(R a, R b) { return vsubq_f32(a, b); }
  static R mul(R a, R b) { return vmulq_f32(a, b); }
  static R div(R a, R b) { return vdivq_f32(a, b); }
  static R fma(R a, R b, R c) { return vfmaq_f32(c, a, b); }
  static R max(R a, R b) { return vmaxq_f32(a, b); }  // NaN propagates
  static R min(R a, R b) { return vminq_f32(a, b); }
  static float hsum(R v) { return vaddvq_f32(v); }
  static float hmax(R v) { return vmaxvq_f32(v); }
  static float first(R v) { return vgetq_lane_f32(v, 0); }
  static R round(R v) { return vrndnq_f32(v); }
  static R pow2i(R n) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23));
  }
  static R lt_select(R a, R b, R x, R y) { return vbslq_f32(vcltq_f32(a, b), x, y); }
  static R load_bf16(const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
  static R load_f16(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
  static void store_hi16(uint16_t* p, R v) { vst1_u16(p, vshrn_n_u32(vreinterpretq_u32_f32(v), 16)); }
  static void transpose(R r[4]) {
    R t0 = vtrn1q_f32(r[0], r[1]), t1 = vtrn2q_f32(r[0], r[1]);
    R t2 = vtrn1q_f32(r[2], r[3]), t3 = vtrn2q_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
  }
};

#include "cpu/kernels_generic.inc"

constexpr int kMr = 8, kNv = 3;  // 8 x 12 tile: 24 accumulators, 3 B vectors, 1 broadcast
const Kernels kTable{
    .level = Simd::Neon,
    .mr = kMr,
    .nr = kNv * V128::L,
    .gemm_micro = gemm_micros<V128, kMr, kNv>(),
    .gemm_tail = gemm_tails<V128, kMr, kNv>(),
    .pack_b = pack_b_transposed<V128>,
    .pack_a = pack_a_transposed<V128>,
    .epilogue = epilogue_t<V128>,
    .layer_norm_row = layer_norm_row_t<V128>,
    .rms_norm_row = rms_norm_row_t<V128>,
    .rope_row = rope_row_t<V128>,
    .attention = {.run = attention_task_t<V128>, .scratch = attention_scratch_t<V128>, .query_block = AttnShape<V128>::BQ},
};

}  // namespace

const Kernels* neon_kernels() { return &kTable; }

}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const Kernels* neon_kernels() { return nullptr; }
}  // namespace tessera::cpu
#endif
