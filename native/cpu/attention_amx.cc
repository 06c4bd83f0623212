// The AMX level's bf16 attention (precision 'bf16'; Kernels::bf16_attention, run by attention.cc):
// the flash attention of kernels_generic.inc with its two products on AMX tiles, bf16 operands and
// f32 sums (TDPBF16PS). The online softmax (running max, exp, rescale, row sums) is the f32 one, with
// the f32 path's exp (v_exp).
//
// S = Q·Kᵀ takes q and k as two bf16 terms each, hi = bf16(x) and lo = bf16(x - hi) (nearest even),
// and sums q_hi·k_hi + q_lo·k_hi + q_hi·k_lo: scores to about 16 bits, where one bf16 term leaves
// 8. The softmax turns an absolute score error into a relative weight error, and scores run to tens
// where q and k are normed and unscaled (Gemma 4): with one term, such a tower's blocks move past HF's
// own bf16 error (docs/decisions/0001-gemma4-attention-products-f32.md). The three products are one
// dot product over a head dim three times as long: queries packed as [hi, lo, hi], keys as [hi, hi, lo]. S is scaled in f32. P is rounded to
// bf16 (one term) for O += P·V into an f32 O, v to bf16 as it is packed; the row sums l add the f32
// P, before rounding.
//
// Per work item the keys and values are packed once into slot scratch as B tiles in VNNI form (16
// rows of 16 bf16 pairs), each tile's rows contiguous (a 64-byte stride: a strided tile's 16 rows
// could share one L1 set): keys as [nkp/16][hk/2][16] pairs (pairs of head-dim values, 16 keys per
// row), values as [hv/16][nkp/2][16] pairs (pairs of keys, 16 head-dim columns per row). The head dim is
// tripled and zero-padded to hk (a multiple of 32: an A tile row) for Q·Kᵀ and zero-padded to hv (a
// multiple of 16: a C tile's columns) for P·V; keys to whole key blocks. Qwen's 72 runs as 224 and 80. Query blocks of kBq rows are computed in whole 32-row halves (two 16-row tiles),
// key blocks of kBk keys in 32-key steps up to the block's last key. Every tile is 16 rows of 64
// bytes (amx::configure_tiles): tiles 0-3 accumulate a 32 x 32 piece, 4-5 hold A, 6-7 B.
#include <cstddef>
#include <cstdint>

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

#include "cpu/vec_avx512.h"

#include "cpu/kernels_generic.inc"

#ifndef TESSERA_AMX_ATTN_BQ
#define TESSERA_AMX_ATTN_BQ 64  // query rows per block (a multiple of 32; tuning runs may override)
#endif
#ifndef TESSERA_AMX_ATTN_BK
#define TESSERA_AMX_ATTN_BK 128  // keys per key block (a multiple of 32)
#endif
constexpr int kBq = TESSERA_AMX_ATTN_BQ, kBk = TESSERA_AMX_ATTN_BK;
static_assert(kBq % 32 == 0 && kBk % 32 == 0, "blocks of whole 32 x 32 tile pieces");

constexpr int64_t round_up(int64_t n, int64_t g) { return (n + g - 1) / g * g; }

// The slot scratch of one item, in floats (each part starts on a 64-byte line): the plan that both
// allocates (attention_scratch) and lays out (attention_task) it.
struct Layout {
  int64_t hk, hv, nkp;  // split head dim padded for Q·Kᵀ (32) and head dim for P·V (16), keys padded to kBk
  size_t kp, vp, qb, s, pb, o, m, l, corr, rsum, stage, total;
  Layout(int64_t nk, int64_t hd) : hk(round_up(3 * hd, 32)), hv(round_up(hd, 16)), nkp(round_up(nk, kBk)) {
    size_t at = 0;
    auto part = [&](int64_t floats) {
      const size_t here = at;
      at += size_t(round_up(floats, 16));
      return here;
    };
    kp = part(hk / 2 * nkp);   // keys: [nkp/16][hk/2][16] bf16 pairs
    vp = part(nkp / 2 * hv);   // values: [hv/16][nkp/2][16] bf16 pairs
    qb = part(kBq * hk / 2);   // queries: [kBq][hk] bf16
    s = part(kBq * kBk);       // scores: [kBq][kBk] f32
    pb = part(kBq * kBk / 2);  // P: [kBq][kBk] bf16
    o = part(kBq * hv);        // O: [kBq][hv] f32
    m = part(kBq), l = part(kBq), corr = part(kBq), rsum = part(kBq);
    stage = part(hk);          // one row split for the scores (split_row), f32
    total = at;
  }
};

inline __mmask16 first(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n > 0 ? n : 0)) - 1u); }

// 32 floats (n of them real, the rest zero) rounded to bf16, nearest even: 16 pair dwords.
inline __m512i bf16_pairs(const float* x, int64_t n) {
  const __m512 a = _mm512_maskz_loadu_ps(first(n), x), b = _mm512_maskz_loadu_ps(first(n - 16), x + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a -> low 16 bf16, b -> high 16
}

// A row of q or k split for the scores: stage = [x, x, x] with part `lo` replaced by x - bf16(x),
// which bf16_pairs then rounds to hi, hi and lo (the file's comment).
void split_row(float* stage, const float* x, int64_t hd, int lo) {
  for (int64_t d = 0; d < hd; d += 16) {
    const __mmask16 m = first(hd - d);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + d);
    const __m512 hi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v)), 16));
    for (int part = 0; part < 3; ++part)
      _mm512_mask_storeu_ps(stage + part * hd + d, m, part == lo ? _mm512_sub_ps(v, hi) : v);
  }
}

// Keys: pair (dp, j) = (K[j][2dp], K[j][2dp+1]) of the split row K[j] = [hi, hi, lo] at
// [j/16][dp][j%16], j < nkp, dp < hk/2, zero past 3 hd and nk.
void pack_keys(uint32_t* kp, float* stage, const float* k, int64_t ldk, int64_t nk, int64_t hd, const Layout& p) {
  const __m512i row = _mm512_slli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 4);
  for (int64_t j = 0; j < p.nkp; ++j) {
    if (j < nk) split_row(stage, k + j * ldk, hd, 2);
    for (int64_t d0 = 0; d0 < p.hk; d0 += 32) {
      const __m512i v = j < nk ? bf16_pairs(stage + d0, 3 * hd - d0) : _mm512_setzero_si512();
      _mm512_i32scatter_epi32(kp + (j / 16 * (p.hk / 2) + d0 / 2) * 16 + j % 16, row, v, 4);
    }
  }
}

// Values: pair (kp, c) = (v[2kp][c], v[2kp+1][c]) at [c/16][kp][c%16], kp < nkp/2, c < hv, zero past
// hd and nk.
void pack_values(uint32_t* vp, const float* v, int64_t ldv, int64_t nk, int64_t hd, const Layout& p) {
  for (int64_t j = 0; j < p.nkp; j += 2)
    for (int64_t c = 0; c < p.hv; c += 16) {
      const __mmask16 m = first(hd - c);
      const __m512 a = j < nk ? _mm512_maskz_loadu_ps(m, v + j * ldv + c) : _mm512_setzero_ps();
      const __m512 b = j + 1 < nk ? _mm512_maskz_loadu_ps(m, v + (j + 1) * ldv + c) : _mm512_setzero_ps();
      const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
      const __m512i hi = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b)), 16);
      _mm512_storeu_si512(vp + (c / 16 * (p.nkp / 2) + j / 2) * 16, _mm512_or_si512(lo, hi));
    }
}

// S[i][j] = Σ_d Q[i][d] K[key0 + j][d] (f32 sums) for i < nb, j < nkt (multiples of 32).
void scores(const uint16_t* qb, const uint32_t* kp, const Layout& p, int64_t key0, float* s, int64_t nb, int64_t nkt) {
  const size_t la = size_t(p.hk) * 2, lb = 64, ls = size_t(kBk) * 4;
  const int64_t tile = p.hk / 2 * 16;  // a 16-key column of the keys: [hk/2][16] pairs
  for (int64_t i0 = 0; i0 < nb; i0 += 32)
    for (int64_t j0 = 0; j0 < nkt; j0 += 32) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t d0 = 0; d0 < p.hk; d0 += 32) {
        const uint32_t* b = kp + (key0 + j0) / 16 * tile + d0 / 2 * 16;
        _tile_loadd(4, qb + i0 * p.hk + d0, la);
        _tile_loadd(5, qb + (i0 + 16) * p.hk + d0, la);
        _tile_loadd(6, b, lb);
        _tile_loadd(7, b + tile, lb);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      float* c = s + i0 * kBk + j0;
      _tile_stored(0, c, ls);
      _tile_stored(1, c + 16, ls);
      _tile_stored(2, c + 16 * kBk, ls);
      _tile_stored(3, c + 16 * kBk + 16, ls);
    }
}

// O[i][c] += Σ_j P[i][j] V[key0 + j][c] (f32 sums) for i < nb, c < hv, j < nkt (multiples of 32).
void values(const uint16_t* pb, const uint32_t* vp, const Layout& p, int64_t key0, float* o, int64_t nb, int64_t nkt) {
  const size_t la = size_t(kBk) * 2, lb = 64, lv = size_t(p.hv) * 4;
  const int64_t tile = p.nkp / 2 * 16;  // 16 head-dim columns of the values: [nkp/2][16] pairs
  for (int64_t i0 = 0; i0 < nb; i0 += 32)
    for (int64_t c0 = 0; c0 < p.hv; c0 += 32) {
      const bool two = c0 + 16 < p.hv;  // a second 16-column tile
      float* o0 = o + i0 * p.hv + c0;
      float* o1 = o0 + 16 * p.hv;
      _tile_loadd(0, o0, lv);
      _tile_loadd(2, o1, lv);
      if (two) {
        _tile_loadd(1, o0 + 16, lv);
        _tile_loadd(3, o1 + 16, lv);
      }
      for (int64_t kk = 0; kk < nkt; kk += 32) {
        const uint32_t* b = vp + c0 / 16 * tile + (key0 + kk) / 2 * 16;
        _tile_loadd(4, pb + i0 * kBk + kk, la);
        _tile_loadd(5, pb + (i0 + 16) * kBk + kk, la);
        _tile_loadd(6, b, lb);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(2, 5, 6);
        if (two) {
          _tile_loadd(7, b + tile, lb);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, o0, lv);
      _tile_stored(2, o1, lv);
      if (two) {
        _tile_stored(1, o0 + 16, lv);
        _tile_stored(3, o1 + 16, lv);
      }
    }
}

// One (segment, head, query range): flash attention with an online softmax, products on AMX.
void attention_task(const AttnJob& job, float* scratch) {
  using V = V512;
  using R = V::R;
  amx::configure_tiles();
  const Layout p(job.nk, job.hd);
  const int64_t hd = job.hd;
  uint32_t* kp = reinterpret_cast<uint32_t*>(scratch + p.kp);
  uint32_t* vp = reinterpret_cast<uint32_t*>(scratch + p.vp);
  uint16_t* qb = reinterpret_cast<uint16_t*>(scratch + p.qb);
  uint16_t* pb = reinterpret_cast<uint16_t*>(scratch + p.pb);
  float *S = scratch + p.s, *O = scratch + p.o, *m = scratch + p.m, *l = scratch + p.l;
  float *corr = scratch + p.corr, *rsum = scratch + p.rsum;  // corr: first m_old - m_new, then exp of it
  float* stage = scratch + p.stage;
  pack_keys(kp, stage, job.k, job.ldk, job.nk, hd, p);
  pack_values(vp, job.v, job.ldv, job.nk, hd, p);
  const R scale = V::set1(job.scale);
  for (int64_t q0 = 0; q0 < job.nq; q0 += kBq) {
    const int64_t nq = job.nq - q0 < kBq ? job.nq - q0 : kBq, nb = round_up(nq, 32);
    // Queries split as [hi, lo, hi] (zero past 3 hd and past nq: rows nq..nb are computed and dropped).
    for (int64_t i = 0; i < nb; ++i) {
      if (i < nq) split_row(stage, job.q + (q0 + i) * job.ldq, hd, 1);
      for (int64_t d0 = 0; d0 < p.hk; d0 += 32)
        _mm512_storeu_si512(qb + i * p.hk + d0, i < nq ? bf16_pairs(stage + d0, 3 * hd - d0) : _mm512_setzero_si512());
      for (int64_t c = 0; c < p.hv; c += V::L) V::store(O + i * p.hv + c, V::zero());
      m[i] = -__builtin_inff(), l[i] = 0.0f;
    }
    for (int64_t k0 = 0; k0 < job.nk; k0 += kBk) {
      const int64_t nkb = job.nk - k0 < kBk ? job.nk - k0 : kBk, nkt = round_up(nkb, 32), nv = nkt / V::L;
      scores(qb, kp, p, k0, S, nb, nkt);
      // The f32 softmax, as kernels_generic.inc's: the new maxima of the scaled scores first, then
      // the exponentials (independent work across rows). Keys past nkb are masked out (P 0).
      for (int64_t i = 0; i < nb; ++i) {
        const float* si = S + i * kBk;
        R mx = V::set1(-__builtin_inff());
        for (int64_t v = 0; v < nv; ++v) mx = _mm512_mask_max_ps(mx, first(nkb - v * V::L), mx, V::mul(V::load(si + v * V::L), scale));
        const float bmax = V::hmax(mx);
        const float mnew = bmax > m[i] ? bmax : m[i];
        corr[i] = m[i] - mnew;
        m[i] = mnew;
      }
      for (int64_t i = 0; i < nb; ++i) {
        const float* si = S + i * kBk;
        const R mneg = V::set1(-m[i]);
        R sum = V::zero();
        for (int64_t v = 0; v < nv; v += 2) {
          const R p0 = _mm512_maskz_mov_ps(first(nkb - v * V::L), v_exp<V>(V::fma(V::load(si + v * V::L), scale, mneg)));
          const R p1 =
              _mm512_maskz_mov_ps(first(nkb - (v + 1) * V::L), v_exp<V>(V::fma(V::load(si + (v + 1) * V::L), scale, mneg)));
          sum = V::add(sum, V::add(p0, p1));
          _mm512_storeu_si512(pb + i * kBk + v * V::L, (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
        }
        rsum[i] = V::hsum(sum);
      }
      for (int64_t i = 0; i < nb; i += V::L) {  // nb: whole vectors of rows
        const R c = v_exp<V>(V::load(corr + i));  // 0 on the first block (m_old = -inf)
        V::store(corr + i, c);
        V::store(l + i, V::fma(V::load(l + i), c, V::load(rsum + i)));
      }
      for (int64_t i = 0; i < nb; ++i) {
        const R c = V::set1(corr[i]);
        for (int64_t d = 0; d < p.hv; d += V::L) V::store(O + i * p.hv + d, V::mul(V::load(O + i * p.hv + d), c));
      }
      values(pb, vp, p, k0, O, nb, nkt);
    }
    for (int64_t i = 0; i < nq; ++i) {
      float* dst = job.out + (q0 + i) * job.ldo;
      const R inv = V::set1(1.0f / l[i]);
      for (int64_t d = 0; d < hd; d += V::L)
        _mm512_mask_storeu_ps(dst + d, first(hd - d), V::mul(V::load(O + i * p.hv + d), inv));
    }
  }
}

size_t attention_scratch(int64_t nk, int64_t hd) { return Layout(nk, hd).total; }

const AttnKernel kAmxAttention{attention_task, attention_scratch, kBq};

}  // namespace
}  // namespace tessera::cpu

#pragma GCC pop_options

namespace tessera::cpu {
const AttnKernel* amx_attention() { return &kAmxAttention; }
}  // namespace tessera::cpu

#else
namespace tessera::cpu {
const AttnKernel* amx_attention() { return nullptr; }
}  // namespace tessera::cpu
#endif
