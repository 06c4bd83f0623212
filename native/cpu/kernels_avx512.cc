// AVX-512 (F/BW/VL/DQ) kernels: 16 lanes, 32 registers. Compiled for that target with a pragma so
// the rest of the build stays baseline x86-64; cpu_backend.cc picks this table only where
// cpu_features() reports AVX-512 with OS support.
#include <cstddef>
#include <cstdint>

#include "cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
// GCC 12 reports its own _mm512_undefined_ps() inside every masked AVX-512 builtin as
// "may be used uninitialized" at -O3 (a known false positive); keep the build log clean.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")

namespace tessera::cpu {
namespace {

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

struct V512 {
  using R = __m512;
  static constexpr int L = 16, kAcc = 24, kAttnNvk = TESSERA_AVX512_ATTN_NVK;
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
};

#include "cpu/kernels_generic.inc"

constexpr int kMr = TESSERA_AVX512_MR, kNv = TESSERA_AVX512_NV;  // 12 x 32: 24 accumulators, 2 B vectors
const Kernels kTable{Simd::Avx512,           kMr,
                     kNv * V512::L,          gemm_micro_t<V512, kMr, kNv>,
                     pack_b_t<V512>,         epilogue_t<V512>,
                     act_row_t<V512>,        layer_norm_row_t<V512>,
                     rms_norm_row_t<V512>, rope_row_t<V512>,   attention_task_t<V512>,
                     attention_scratch_t<V512>};

}  // namespace
}  // namespace tessera::cpu

#pragma GCC pop_options

namespace tessera::cpu {
const Kernels* avx512_kernels() { return &kTable; }
}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const Kernels* avx512_kernels() { return nullptr; }
}  // namespace tessera::cpu
#endif
