// The x86 bf16 GEMMs (precision 'bf16'; Kernels::bf16): AVX512-BF16's vdpbf16ps on a 12 x 32
// register tile, and AMX's TDPBF16PS on a 32 x 32 tile of four 16 x 16 accumulator tiles. Both read
// the same weight panels: [k/2][32] dwords, each a pair of bf16 (k even low, k odd high) of one
// column, the layout vdpbf16ps multiplies lane by lane and AMX calls VNNI (its B tile is 16 of
// those pair rows by 16 columns, loaded with the panel's 128-byte row stride). A differs: vdpbf16ps
// broadcasts one row's pair, so A is [k/2][12] dwords; an AMX A tile is 16 rows of 32 k values,
// so A is [32][kc] row-major bf16. Each table is avx512_kernels() plus its bf16 GEMM; the AMX table
// also has the AMX attention (attention_amx.cc).
// Both take K in pairs (granule 2), so that a weight with any even K is packed in place at open:
// AMX runs whole tiles of 32 k and the last K block's rest (4,304 = 134 x 32 + 16, Qwen's MLP) with
// vdpbf16ps on the same panels (every AMX-BF16 CPU has AVX512-BF16).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,amx-tile,amx-bf16")

#include "cpu/amx_tiles.h"

namespace tessera::cpu {
namespace {

constexpr int kNr = 32;  // weight panel columns (both kernels)

// 32 floats (n of them real, the rest zero), clamped, rounded to bf16 (nearest even): 16 pair dwords.
inline __m512i to_bf16_pairs(const float* x, int n, bool clamp, __m512 lo, __m512 hi) {
  const __mmask16 m0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n > 0 ? n : 0)) - 1u);
  const int n1 = n - 16;
  const __mmask16 m1 = n1 >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n1 > 0 ? n1 : 0)) - 1u);
  __m512 a = _mm512_maskz_loadu_ps(m0, x), b = _mm512_maskz_loadu_ps(m1, x + 16);
  if (clamp) {
    a = _mm512_maskz_mov_ps(m0, _mm512_min_ps(hi, _mm512_max_ps(lo, a)));
    b = _mm512_maskz_mov_ps(m1, _mm512_min_ps(hi, _mm512_max_ps(lo, b)));
  }
  return (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a -> low 16 bf16, b -> high 16
}

// Weight panel: dst dword (kp, j) = (W[j][2kp], W[j][2kp+1]), j < 32, zero past n and past kc
// (up to kc rounded up to KSTEP).
template <int KSTEP>
void pack_b_pairs(uint16_t* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc) {
  const int64_t kp_n = (kc + KSTEP - 1) / KSTEP * KSTEP / 2;
  for (int64_t kp = 0; kp < kp_n; ++kp) {
    uint16_t* d = dst + kp * 2 * kNr;
    const int64_t k = 2 * kp;
    for (int64_t j = 0; j < kNr; ++j) {
      const size_t at = size_t(j * ldw + k);
      d[2 * j] = j < n && k < kc ? bf16_at(w, dt, at) : 0;
      d[2 * j + 1] = j < n && k + 1 < kc ? bf16_at(w, dt, at + 1) : 0;
    }
  }
}

// ---- AVX512-BF16

constexpr int kDpMr = 12, kDpNv = 2;  // 24 accumulators, 2 weight vectors, 1 broadcast

// 16 x 16 dwords transposed in registers: lane j of r[i] goes to lane i of r[j].
__attribute__((always_inline)) inline void transpose16(__m512i r[16]) {
  __m512i t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]), t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]), r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]), r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 16; i += 8)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j)
      t[i + j] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0x88), t[i + j + 4] = _mm512_shuffle_i32x4(r[i + j], r[i + j + 4], 0xdd);
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) r[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88), r[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
}

// A: dst dword (kp, i) = bf16 pair (x[i][2kp], x[i][2kp+1]), i < 12. Each 32 k of the 12 rows are
// converted row by row and transposed in registers, so that A is written in order, a line at a time
// (a scatter per row wrote 16 lines per store and cost a third of the micro-kernel's time).
void pack_a_dp(uint16_t* dst, const float* x, int64_t ldx, int64_t rows, int64_t kc, bool clamp, float lo, float hi) {
  const int64_t kp_n = (kc + 1) / 2;
  uint32_t* d = reinterpret_cast<uint32_t*>(dst);
  const __m512 lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
  for (int64_t k0 = 0; k0 < kc; k0 += 32) {
    const int64_t kp0 = k0 / 2, np = kp_n - kp0 < 16 ? kp_n - kp0 : 16;
    __m512i r[16];
#pragma GCC unroll 16
    for (int64_t i = 0; i < 16; ++i)
      r[i] = i < rows && i < kDpMr ? to_bf16_pairs(x + i * ldx + k0, int(kc - k0 < 32 ? kc - k0 : 32), clamp, lov, hiv)
                                   : _mm512_setzero_si512();
    transpose16(r);  // r[p]: pair kp0 + p of rows 0..15 (12..15 zero, not stored)
#pragma GCC unroll 16
    for (int64_t p = 0; p < 16; ++p)
      if (p < np) _mm512_mask_storeu_epi32(d + (kp0 + p) * kDpMr, __mmask16((1u << kDpMr) - 1u), r[p]);
  }
}

template <int MR>
void micro_dp(int64_t kc, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, bool accumulate, const void* pf,
              int64_t pf_lines) {
  __m512 acc[MR][kDpNv];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kDpNv; ++v) acc[i][v] = accumulate ? _mm512_loadu_ps(c + i * ldc + v * 16) : _mm512_setzero_ps();
  const uint32_t* ap = reinterpret_cast<const uint32_t*>(a);
  const char* bp = reinterpret_cast<const char*>(b);
  const char* pfc = static_cast<const char*>(pf);
  const int64_t kp_n = kc / 2;
  // The next panel's lines, one every `every` pair steps (Kernels::GemmMicro)
  const int64_t every = pf_lines > 0 ? (kp_n + pf_lines - 1) / pf_lines : kp_n + 1;
  for (int64_t kp = 0, until = every; kp < kp_n; ++kp, ap += kDpMr, bp += kNr * 4) {
    if (kp + 1 == until && pf_lines > 0) {
      __builtin_prefetch(pfc, 0, 2);
      pfc += Kernels::kPrefetchLine, --pf_lines, until += every;
    }
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + 64);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(ap[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kDpNv; ++v) _mm512_storeu_ps(c + i * ldc + v * 16, acc[i][v]);
}

const Bf16Gemm kDpGemm{Bf16Gemm::Sum::PairOddFirst, kDpMr, kNr, 2, micro_dp<kDpMr>, pack_a_dp, pack_b_pairs<2>};

// ---- AMX

constexpr int kAmxMr = 32, kAmxK = 32;  // rows of A (two 16-row tiles), k values an A tile row holds

// A: [32][kc rounded up to 2] bf16, row-major (each row's last store masked to its end).
void pack_a_amx(uint16_t* dst, const float* x, int64_t ldx, int64_t rows, int64_t kc, bool clamp, float lo, float hi) {
  const int64_t kcp = (kc + 1) / 2 * 2;
  const __m512 lov = _mm512_set1_ps(lo), hiv = _mm512_set1_ps(hi);
  for (int64_t i = 0; i < kAmxMr; ++i)
    for (int64_t k0 = 0; k0 < kcp; k0 += 32) {
      const int64_t n = kcp - k0 < 32 ? kcp - k0 : 32;  // values of this row in this store (even)
      const __m512i v = i < rows ? to_bf16_pairs(x + i * ldx + k0, int(kc - k0 < n ? kc - k0 : n), clamp, lov, hiv)
                                 : _mm512_setzero_si512();
      _mm512_mask_storeu_epi16(dst + i * kcp + k0, __mmask32(n == 32 ? 0xFFFFFFFFu : (1u << n) - 1u), v);
    }
}

// Tiles 0-3 hold the C quarter tiles, 4-5 A, 6-7 B (amx::configure_tiles).

// C rows [0, 32) += the pairs [kp0, kp1) of A ([32][kc] bf16) and B ([k/2][32] dwords), by vdpbf16ps:
// the last K block's rest after AMX's whole tiles.
void tail_dp(int64_t kc, int64_t kp0, int64_t kp1, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc) {
  const uint32_t* bp = reinterpret_cast<const uint32_t*>(b);
  for (int i = 0; i < kAmxMr; ++i) {
    const uint32_t* ai = reinterpret_cast<const uint32_t*>(a + i * kc);
    __m512 c0 = _mm512_loadu_ps(c + i * ldc), c1 = _mm512_loadu_ps(c + i * ldc + 16);
    for (int64_t kp = kp0; kp < kp1; ++kp) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(ai[kp]));
      c0 = _mm512_dpbf16_ps(c0, av, (__m512bh)_mm512_loadu_si512(bp + kp * kNr));
      c1 = _mm512_dpbf16_ps(c1, av, (__m512bh)_mm512_loadu_si512(bp + kp * kNr + 16));
    }
    _mm512_storeu_ps(c + i * ldc, c0);
    _mm512_storeu_ps(c + i * ldc + 16, c1);
  }
}

void micro_amx(int64_t kc, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, bool accumulate, const void* pf,
               int64_t pf_lines) {
  amx::configure_tiles();
  const size_t lc = size_t(ldc) * 4, la = size_t(kc) * 2, lb = size_t(kNr) * 4;
  float* c1 = c + 16 * ldc;
  if (accumulate) {
    _tile_loadd(0, c, lc);
    _tile_loadd(1, c + 16, lc);
    _tile_loadd(2, c1, lc);
    _tile_loadd(3, c1 + 16, lc);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  const char* pfc = static_cast<const char*>(pf);
  const int64_t kt = kc / kAmxK * kAmxK;  // whole tiles; the rest (even) by tail_dp
  const int64_t steps = kt / kAmxK, per = pf_lines > 0 && steps > 0 ? (pf_lines + steps - 1) / steps : 0;
  for (int64_t k0 = 0; k0 < kt; k0 += kAmxK) {
    for (int64_t l = 0; l < per && pf_lines > 0; ++l, --pf_lines, pfc += Kernels::kPrefetchLine) __builtin_prefetch(pfc, 0, 2);
    const char* bk = reinterpret_cast<const char*>(b) + size_t(k0 / 2) * lb;
    _tile_loadd(4, a + k0, la);
    _tile_loadd(5, a + 16 * kc + k0, la);
    _tile_loadd(6, bk, lb);
    _tile_loadd(7, bk + 64, lb);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, lc);
  _tile_stored(1, c + 16, lc);
  _tile_stored(2, c1, lc);
  _tile_stored(3, c1 + 16, lc);
  if (kt < kc) tail_dp(kc, kt / 2, kc / 2, a, b, c, ldc);
}

const Bf16Gemm kAmxGemm{Bf16Gemm::Sum::PairEvenFirst, kAmxMr, kNr, 2, micro_amx, pack_a_amx, pack_b_pairs<2>};

}  // namespace
}  // namespace tessera::cpu

#pragma GCC pop_options

namespace tessera::cpu {

// A bf16 level's table: its base level's, plus the bf16 GEMM (copied on first use, not at static
// initialisation, when the base table of another file may not be built yet).
static Kernels with_bf16(const Kernels& base, Simd level, const Bf16Gemm& g) {
  Kernels k = base;
  k.level = level;
  k.bf16 = &g;
  return k;
}

const Kernels* avx512_bf16_kernels() {
  static const Kernels k = with_bf16(*avx512_kernels(), Simd::Avx512Bf16, kDpGemm);
  return &k;
}
const Kernels* amx_kernels() {
  static const Kernels k = [] {
    Kernels t = with_bf16(*avx512_kernels(), Simd::Amx, kAmxGemm);
    t.bf16_attention = amx_attention();
    return t;
  }();
  return &k;
}

}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const Kernels* avx512_bf16_kernels() { return nullptr; }
const Kernels* amx_kernels() { return nullptr; }
}  // namespace tessera::cpu
#endif
