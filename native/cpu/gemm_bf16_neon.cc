// The arm64 bf16 GEMM (precision 'bf16'; Kernels::bf16): FEAT_BF16's BFMMLA, which multiplies a
// 2 x 4 bf16 block of A by a 4 x 2 block of B into a 2 x 2 f32 block of C. An 8 x 8 register tile:
// 16 accumulators (4 row pairs x 4 column pairs), 4 A and 4 B registers a step of 4 k values. A is
// packed [k/4][4 row pairs][2 rows][4 k] and the weight panel [k/4][4 column pairs][2 columns][4 k],
// so each register is one 16-byte load. The table is neon_kernels() plus this GEMM.
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+bf16")

namespace tessera::cpu {
namespace {

constexpr int kMr = 8, kNr = 8, kK = 4;

// 4 floats rounded to bf16, nearest even (tessera::f32_to_bf16 four lanes at a time: NaN kept quiet).
inline uint16x4_t to_bf16(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t rounded = vaddq_u32(u, vaddq_u32(vdupq_n_u32(0x7fff), vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1))));
  const uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7fffffff)), vdupq_n_u32(0x7f800000));
  const uint32x4_t quiet = vorrq_u32(u, vdupq_n_u32(0x400000));
  return vshrn_n_u32(vbslq_u32(nan, quiet, rounded), 16);
}

// Row pair p, row r of a [k/4][4][2][4] panel: dst + (kq * 4 + p) * 8 + r * 4.
void pack_a_mmla(uint16_t* dst, const float* x, int64_t ldx, int64_t rows, int64_t kc, bool clamp, float lo, float hi) {
  const int64_t kq_n = (kc + kK - 1) / kK;
  const float32x4_t lov = vdupq_n_f32(lo), hiv = vdupq_n_f32(hi);
  for (int64_t i = 0; i < kMr; ++i) {
    uint16_t* d = dst + (i / 2) * 8 + (i % 2) * 4;
    for (int64_t kq = 0; kq < kq_n; ++kq, d += kMr * kK) {
      const int64_t k = kq * kK;
      if (i >= rows) {
        vst1_u16(d, vdup_n_u16(0));
        continue;
      }
      float32x4_t v;
      if (k + kK <= kc) {
        v = vld1q_f32(x + i * ldx + k);
      } else {
        float t[4] = {0, 0, 0, 0};
        for (int64_t j = 0; k + j < kc; ++j) t[j] = x[i * ldx + k + j];
        v = vld1q_f32(t);
      }
      if (clamp) v = vminq_f32(hiv, vmaxq_f32(lov, v));
      uint16x4_t h = to_bf16(v);
      if (k + kK > kc) {  // the padding stays zero even where clamping moved it
        uint16_t t[4];
        vst1_u16(t, h);
        for (int64_t j = kc - k; j < kK; ++j) t[j] = 0;
        h = vld1_u16(t);
      }
      vst1_u16(d, h);
    }
  }
}

void pack_b_mmla(uint16_t* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc) {
  const int64_t kq_n = (kc + kK - 1) / kK;
  for (int64_t j = 0; j < kNr; ++j) {
    uint16_t* d = dst + (j / 2) * 8 + (j % 2) * 4;
    for (int64_t kq = 0; kq < kq_n; ++kq, d += kNr * kK)
      for (int64_t t = 0; t < kK; ++t) {
        const int64_t k = kq * kK + t;
        d[t] = j < n && k < kc ? bf16_at(w, dt, size_t(j * ldw + k)) : 0;
      }
  }
}

void micro_mmla(int64_t kc, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, bool accumulate, const void* pf,
                int64_t pf_lines) {
  float32x4_t acc[kMr / 2][kNr / 2];
  // acc[p][q] = [C(2p, 2q), C(2p, 2q+1), C(2p+1, 2q), C(2p+1, 2q+1)]
  for (int p = 0; p < kMr / 2; ++p)
    for (int q = 0; q < kNr / 2; ++q)
      acc[p][q] = accumulate ? vcombine_f32(vld1_f32(c + 2 * p * ldc + 2 * q), vld1_f32(c + (2 * p + 1) * ldc + 2 * q))
                             : vdupq_n_f32(0.0f);
  const char* pfc = static_cast<const char*>(pf);
  const int64_t kq_n = kc / kK, every = pf_lines > 0 ? (kq_n + pf_lines - 1) / pf_lines : kq_n + 1;
  for (int64_t kq = 0, until = every; kq < kq_n; ++kq, a += kMr * kK, b += kNr * kK) {
    if (kq + 1 == until && pf_lines > 0) {
      __builtin_prefetch(pfc, 0, 2);
      pfc += Kernels::kPrefetchLine, --pf_lines, until += every;
    }
    bfloat16x8_t av[kMr / 2], bv[kNr / 2];
    for (int p = 0; p < kMr / 2; ++p) av[p] = vreinterpretq_bf16_u16(vld1q_u16(a + p * 8));
    for (int q = 0; q < kNr / 2; ++q) bv[q] = vreinterpretq_bf16_u16(vld1q_u16(b + q * 8));
    for (int p = 0; p < kMr / 2; ++p)
      for (int q = 0; q < kNr / 2; ++q) acc[p][q] = vbfmmlaq_f32(acc[p][q], av[p], bv[q]);
  }
  for (int p = 0; p < kMr / 2; ++p)
    for (int q = 0; q < kNr / 2; ++q) {
      vst1_f32(c + 2 * p * ldc + 2 * q, vget_low_f32(acc[p][q]));
      vst1_f32(c + (2 * p + 1) * ldc + 2 * q, vget_high_f32(acc[p][q]));
    }
}

const Bf16Gemm kGemm{Bf16Gemm::Sum::PairRoundToOdd, kMr, kNr, kK, micro_mmla, pack_a_mmla, pack_b_mmla};

}  // namespace
}  // namespace tessera::cpu

#pragma GCC pop_options

namespace tessera::cpu {
// neon_kernels() plus the BFMMLA GEMM, copied on first use (see gemm_bf16_x86.cc).
const Kernels* neon_bf16_kernels() {
  static const Kernels k = [] {
    Kernels t = *neon_kernels();
    t.level = Simd::NeonBf16;
    t.bf16 = &kGemm;
    return t;
  }();
  return &k;
}
}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const Kernels* neon_bf16_kernels() { return nullptr; }
}  // namespace tessera::cpu
#endif
