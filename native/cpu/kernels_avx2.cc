// AVX2 + FMA + F16C kernels: 8 lanes, 16 registers (see kernels_avx512.cc for the scheme).
#include <cstddef>
#include <cstdint>

#include "common/cpu_features.h"
#include "cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tessera::cpu {
namespace {

// Tile shapes (compile-time overridable for tuning runs, e.g. -DTESSERA_AVX2_MR=4 -DTESSERA_AVX2_NV=3).
#ifndef TESSERA_AVX2_MR
#define TESSERA_AVX2_MR 6
#endif
#ifndef TESSERA_AVX2_NV
#define TESSERA_AVX2_NV 2
#endif
#ifndef TESSERA_AVX2_ATTN_NVK
#define TESSERA_AVX2_ATTN_NVK 4
#endif
#ifndef TESSERA_BF16_PAIRS
#define TESSERA_BF16_PAIRS 1
#endif
#ifndef TESSERA_AVX2_ATTN_BK
#define TESSERA_AVX2_ATTN_BK 128
#endif
#ifndef TESSERA_AVX2_ATTN_PV_NV
#define TESSERA_AVX2_ATTN_PV_NV 3
#endif

template <bool Unpack>
struct V256 {
  using R = __m256;
  static constexpr int L = 8, kAcc = 12, kAttnNvk = TESSERA_AVX2_ATTN_NVK, kAttnBk = TESSERA_AVX2_ATTN_BK,
                       kAttnPvNv = TESSERA_AVX2_ATTN_PV_NV;
  static R zero() { return _mm256_setzero_ps(); }
  static R set1(float v) { return _mm256_set1_ps(v); }
  static R load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static __m256i mask(int n) {
    alignas(32) static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - n));
  }
  static R loadn(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void storen(float* p, R v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R div(R a, R b) { return _mm256_div_ps(a, b); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R max(R a, R b) { return _mm256_max_ps(a, b); }
  static R min(R a, R b) { return _mm256_min_ps(a, b); }
  static float hsum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  static float hmax(R v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  static float first(R v) { return _mm256_cvtss_f32(v); }
  static R round(R v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R pow2i(R n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
  }
  static R lt_select(R a, R b, R x, R y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
  static R load_bf16(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static R load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static constexpr bool kBf16Pairs = TESSERA_BF16_PAIRS;
  static constexpr bool kFmaLane = false;
  // A pair of bf16 weight vectors (columns 0-7 and 8-15 of a group) in one 256-bit load, widened
  // in two ALU ops, laid out for the widening this table uses (CpuFeatures::bf16_unpack):
  //  - Unpack: two unpacks with zero (port 5 on Intel, off the FMA ports). An unpack works per
  //    128-bit half, so the first vector's columns 0-3 / 4-7 sit at 16-bit slots 0-3 / 8-11
  //    and the second's at 4-7 / 12-15.
  //  - shift and mask: the first vector in the low halves of the 32-bit lanes (shifted up), the
  //    second in the high halves (masked): slots 2i and 2i + 1.
  static constexpr int pair_slot(int i) {  // the 16-bit slot of column i < 16 (panel_col)
    if constexpr (Unpack) return i < 8 ? (i < 4 ? i : i + 4) : (i < 12 ? i - 4 : i);
    else return i < 8 ? 2 * i : 2 * (i - 8) + 1;
  }
  static void load_bf16_pair(const uint16_t* p, R& lo, R& hi) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (Unpack) {
      const __m256i z = _mm256_setzero_si256();
      lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(z, x));
      hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(z, x));
    } else {
      lo = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
      hi = _mm256_and_ps(_mm256_castsi256_ps(x), _mm256_castsi256_ps(_mm256_set1_epi32(int32_t(0xFFFF0000u))));
    }
  }
  // store_hi16 of two vectors into one, interleaved: load_bf16_pair's inverse.
  static void store_pair16(uint16_t* p, R lo, R hi) {
    __m256i v;
    if constexpr (Unpack) {
      v = _mm256_packus_epi32(_mm256_srli_epi32(_mm256_castps_si256(lo), 16),  // per 128-bit half: 4 of lo,
                              _mm256_srli_epi32(_mm256_castps_si256(hi), 16));  // then 4 of hi (pair_slot)
    } else {
      v = _mm256_or_si256(_mm256_srli_epi32(_mm256_castps_si256(lo), 16),
                          _mm256_and_si256(_mm256_castps_si256(hi), _mm256_set1_epi32(int32_t(0xFFFF0000u))));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
  static void store_hi16(uint16_t* p, R v) {  // lanes >> 16 fit 16 bits: the unsigned-saturating pack is exact
    __m256i s = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
  }
  // 8 x 8: 32-bit unpacks, 64-bit unpacks, then a 128-bit lane permute.
  static void transpose(R r[8]) {
    R t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int q = 0; q < 8; q += 4) {
      __m256d a = _mm256_castps_pd(t[q]), b = _mm256_castps_pd(t[q + 1]);
      __m256d c = _mm256_castps_pd(t[q + 2]), d = _mm256_castps_pd(t[q + 3]);
      u[q] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
      u[q + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
      u[q + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
      u[q + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
    }
    for (int m = 0; m < 4; ++m) {
      r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
      r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
    }
  }
};

#include "cpu/kernels_generic.inc"

constexpr int kMr = TESSERA_AVX2_MR, kNv = TESSERA_AVX2_NV;  // 6 x 16 tile: 12 accumulators, 2 B vectors, 1 broadcast
// A table whose GEMM packs and widens bf16 weight pairs as V does; the other kernels never touch
// weight panels, so both tables share one copy of them.
template <class V>
constexpr Kernels table() {
  using S = V256<false>;
  return Kernels{
      .level = Simd::Avx2,
      .mr = kMr,
      .nr = kNv * V::L,
      .gemm_micro = gemm_micros<V, kMr, kNv>(),
      .gemm_tail = gemm_tails<V, kMr, kNv>(),
      .pack_b = pack_b_transposed<V>,
      .pack_a = pack_a_transposed<S>,
      .epilogue = epilogue_t<S>,
      .layer_norm_row = layer_norm_row_t<S>,
      .rms_norm_row = rms_norm_row_t<S>,
      .rope_row = rope_row_t<S>,
      .attention = {.run = attention_task_t<S>, .scratch = attention_scratch_t<S>, .query_block = AttnShape<S>::BQ},
  };
}
// The two differ only in the layout and widening of bf16 weight panels. A weight packed at load
// keeps the layout of the table that packed it, so the choice is made once per process.
const Kernels kShiftTable = table<V256<false>>();
const Kernels kUnpackTable = table<V256<true>>();

}  // namespace
}  // namespace tessera::cpu

#pragma GCC pop_options

namespace tessera::cpu {
const Kernels* avx2_kernels(bool bf16_unpack) { return bf16_unpack ? &kUnpackTable : &kShiftTable; }
const Kernels* avx2_kernels() { return avx2_kernels(cpu_features().bf16_unpack); }
}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const Kernels* avx2_kernels(bool) { return nullptr; }
const Kernels* avx2_kernels() { return nullptr; }
}  // namespace tessera::cpu
#endif
