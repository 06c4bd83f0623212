// The AVX-512 vector type V of kernels_generic.inc (16 lanes, 32 registers) and its blocking
// constants. Included inside a file's anonymous namespace after that file's
// `#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,...")`: kernels_avx512.cc (the f32
// table) and attention_amx.cc (the AMX attention, which shares the f32 softmax's vector math).
#pragma once

// Tile shapes (compile-time overridable for tuning runs, e.g. -DTESSERA_AVX512_MR=14).
#ifndef TESSERA_AVX512_MR
#define TESSERA_AVX512_MR 12
#endif
#ifndef TESSERA_AVX512_NV
#define TESSERA_AVX512_NV 2
#endif
#ifndef TESSERA_AVX512_ATTN_NVK
#define TESSERA_AVX512_ATTN_NVK 4
#endif
#ifndef TESSERA_BF16_PAIRS
#define TESSERA_BF16_PAIRS 1
#endif
#ifndef TESSERA_AVX512_ATTN_BK
#define TESSERA_AVX512_ATTN_BK 128
#endif

struct V512 {
  using R = __m512;
  static constexpr int L = 16, kAcc = 24, kAttnNvk = TESSERA_AVX512_ATTN_NVK, kAttnBk = TESSERA_AVX512_ATTN_BK, kAttnPvNv = 8;
  static R zero() { return _mm512_setzero_ps(); }
  static R set1(float v) { return _mm512_set1_ps(v); }
  static R load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }
  static R loadn(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void storen(float* p, R v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R div(R a, R b) { return _mm512_div_ps(a, b); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R max(R a, R b) { return _mm512_max_ps(a, b); }  // NaN in b propagates
  static R min(R a, R b) { return _mm512_min_ps(a, b); }
  static float hsum(R v) { return _mm512_reduce_add_ps(v); }
  static float hmax(R v) { return _mm512_reduce_max_ps(v); }
  static float first(R v) { return _mm512_cvtss_f32(v); }
  static R round(R v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static R pow2i(R n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
  }
  static R lt_select(R a, R b, R x, R y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x); }
  static R load_bf16(const uint16_t* p) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static R load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static constexpr bool kBf16Pairs = TESSERA_BF16_PAIRS;  // see kernels_avx2.cc
  static constexpr bool kFmaLane = false;
  static constexpr int pair_slot(int i) { return i < 16 ? 2 * i : 2 * (i - 16) + 1; }
  static void load_bf16_pair(const uint16_t* p, R& lo, R& hi) {
    const __m512i x = _mm512_loadu_si512(p);
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(x, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(x, _mm512_set1_epi32(int32_t(0xFFFF0000u))));
  }
  static void store_pair16(uint16_t* p, R lo, R hi) {
    const __m512i v = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(lo), 16),
                                      _mm512_and_si512(_mm512_castps_si512(hi), _mm512_set1_epi32(int32_t(0xFFFF0000u))));
    _mm512_storeu_si512(p, v);
  }
  static void store_hi16(uint16_t* p, R v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)));
  }
  // 16 x 16: 32-bit unpacks, 64-bit unpacks, then two rounds of 128-bit lane shuffles.
  static void transpose(R r[16]) {
    R t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int q = 0; q < 16; q += 4) {  // u[q + m], lane l: element 4l + m of rows q..q+3
      __m512d a = _mm512_castps_pd(t[q]), b = _mm512_castps_pd(t[q + 1]);
      __m512d c = _mm512_castps_pd(t[q + 2]), d = _mm512_castps_pd(t[q + 3]);
      u[q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      u[q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      u[q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      u[q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int m = 0; m < 4; ++m) {
      R a = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44), b = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
      R c = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE), d = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
      r[m] = _mm512_shuffle_f32x4(a, b, 0x88);
      r[4 + m] = _mm512_shuffle_f32x4(a, b, 0xDD);
      r[8 + m] = _mm512_shuffle_f32x4(c, d, 0x88);
      r[12 + m] = _mm512_shuffle_f32x4(c, d, 0xDD);
    }
  }
};
