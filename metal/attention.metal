// out = softmax(q kᵀ · scale) v for one segment (rows that attend to each other: one image), every head.
// p.n keys; p.nq query rows (p.n for a segment, or a chunk of queries against all its keys). Grid: query
// blocks x heads. Query rows past nq take part in every barrier and collective; they only skip the store.
//
// attention_flash_{64,72,80}, attention_flash (head_dim a multiple of 8, <= kAttnMaxHeadDim): flash attention
// on simdgroup matrices (docs/metal.md#kernels). A threadgroup of 4 simdgroups takes kAttnBQ = 32 query rows
// of one head, 8 per simdgroup, and streams the head's keys and values through threadgroup memory once, in
// tiles of p.kblock rows. Each simdgroup keeps its 8 x head_dim query block (scaled) and output accumulator
// in simdgroup_float8x8 registers; per tile it computes S = Q Kᵀ (8 x kblock) into its own scratch rows,
// runs the online softmax there with 4 lanes per row (row max and sum by shuffles, the running max and sum
// in those lanes' registers), and updates O = diag(correction) O + P V with simdgroup multiplies. The fixed
// head sizes have their own kernels so the register arrays are sized at compile time.
// [[threadgroup(0)]]: the layout of kargs::attn_flash_tg_floats (metal/shared/args.h).
//
// attention_segment (any other head_dim <= 128): 4 query rows per threadgroup, lane j scores key j of the
// tile with a scalar loop, lanes own output dims lane, lane + 32, ...
//
// Precision 'f16' (docs/metal.md#half-precision): q, k, v and out are half in device memory. The _h kernels
// stage the K and V tiles as half and multiply them on simdgroup_half8x8 against the float query block and
// probabilities into float S and O; the _hs kernels (a tower whose softmax is too sharp for half products,
// backend::AttnProducts::F32) widen K and V to float tiles. Either way the query block is scaled in float, and
// the scores, the softmax's running max and sum and the output accumulator stay float: raw scores can leave
// half's range where the scaled ones would not (Gemma 4 scales by 1), and the probabilities need float's
// resolution near 0. attention_segment_h: the row kernel over half storage, float tiles.
#include "kernel_common.h"

constant constexpr uint BQ = kargs::kAttnBQ;

// A: q, k, v and out as stored (float, or half in precision 'f16'); T: the K and V tiles' type.
template <uint kHd, typename A, typename T>  // kHd 0: head_dim from p
inline void flash(device const A* q, device const A* k, device const A* v, device A* o,
                  constant kargs::Attention& p, threadgroup float* tg, uint2 gp, uint tid, uint sg, uint lane) {
    const uint hd = kHd ? kHd : p.head_dim, kb = p.kblock, head = gp.y, nd = hd / 8;
    constexpr uint kMaxNd = kHd ? kHd / 8 : kargs::kAttnMaxHeadDim / 8;
    const uint sw = kargs::attn_scratch_width(hd, kb);
    threadgroup T* ks = reinterpret_cast<threadgroup T*>(tg);                 // [kb][hd]
    threadgroup T* vs = ks + kb * hd;                                          // [kb][hd]
    threadgroup float* sc = reinterpret_cast<threadgroup float*>(vs + kb * hd);  // [BQ][sw]
    threadgroup float* mine = sc + sg * 8 * sw;  // this simdgroup's 8 rows
    const uint q0 = gp.x * BQ;
    for (uint i = tid; i < BQ * hd; i += kargs::kAttnThreads) {
        const uint r = i / hd, d = i % hd, row = q0 + r;
        sc[r * sw + d] = row < p.nq ? float(q[row * p.ldq + head * hd + d]) * p.scale : 0.0f;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_float8x8 qm[kMaxNd], om[kMaxNd];
    for (uint j = 0; j < nd; j++) {
        simdgroup_load(qm[j], mine, sw, ulong2(8 * j, 0));
        om[j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    }
    const uint r = lane / 4, part = lane % 4, per = kb / 4;  // softmax: 4 lanes per row, `per` keys each
    float m = kNoScore, l = 0.0f;
    for (uint k0 = 0; k0 < p.n; k0 += kb) {
        threadgroup_barrier(mem_flags::mem_threadgroup);       // the previous tile is no longer read
        if (k0 + kb <= p.n) {
            for (uint i = tid; i < kb * hd; i += kargs::kAttnThreads) {
                const uint j = i / hd, d = i % hd, key = k0 + j;
                ks[i] = T(k[key * p.ldk + head * hd + d]);
                vs[i] = T(v[key * p.ldv + head * hd + d]);
            }
        } else {
            for (uint i = tid; i < kb * hd; i += kargs::kAttnThreads) {
                const uint j = i / hd, d = i % hd, key = k0 + j;
                ks[i] = key < p.n ? T(k[key * p.ldk + head * hd + d]) : T(0.0f);
                vs[i] = key < p.n ? T(v[key * p.ldv + head * hd + d]) : T(0.0f);
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // S = Q Kᵀ, 8 keys at a time (Kᵀ by a transposed load of the K tile's rows)
        for (uint c = 0; c < kb / 8; c++) {
            simdgroup_float8x8 s = make_filled_simdgroup_matrix<float, 8>(0.0f);
            for (uint j = 0; j < nd; j++) {
                simdgroup_matrix<T, 8, 8> kt;
                simdgroup_load(kt, ks + 8 * c * hd + 8 * j, hd, ulong2(0, 0), true);
                simdgroup_multiply_accumulate(s, qm[j], kt, s);
            }
            simdgroup_store(s, mine, sw, ulong2(8 * c, 0));
        }
        simdgroup_barrier(mem_flags::mem_threadgroup);
        // online softmax of row r over this tile's keys part * per ... part * per + per - 1
        threadgroup float* srow = mine + r * sw + part * per;
        float mx = kNoScore;
        for (uint i = 0; i < per; i++)
            if (k0 + part * per + i < p.n) mx = max(mx, srow[i]);
        mx = max(mx, simd_shuffle_xor(mx, 1));
        mx = max(mx, simd_shuffle_xor(mx, 2));
        const float m_new = max(m, mx);                         // finite: the tile has at least one key
        const float corr = precise::exp(m - m_new);             // 0 on the first tile (m = kNoScore)
        float sum = 0.0f;
        for (uint i = 0; i < per; i++) {
            const float pj = k0 + part * per + i < p.n ? precise::exp(srow[i] - m_new) : 0.0f;
            srow[i] = pj;
            sum += pj;
        }
        sum += simd_shuffle_xor(sum, 1);
        sum += simd_shuffle_xor(sum, 2);
        l = l * corr + sum;
        m = m_new;
        // diag(corr) beside P: row r, columns kb .. kb + 7 (2 per lane)
        threadgroup float* drow = mine + r * sw + kb;
        drow[2 * part] = 2 * part == r ? corr : 0.0f;
        drow[2 * part + 1] = 2 * part + 1 == r ? corr : 0.0f;
        simdgroup_barrier(mem_flags::mem_threadgroup);
        simdgroup_float8x8 dg, pm[kargs::kAttnBK / 8];
        simdgroup_load(dg, mine, sw, ulong2(kb, 0));
        for (uint c = 0; c < kb / 8; c++) simdgroup_load(pm[c], mine, sw, ulong2(8 * c, 0));
        for (uint j = 0; j < nd; j++) {
            simdgroup_multiply(om[j], dg, om[j]);
            for (uint c = 0; c < kb / 8; c++) {
                simdgroup_matrix<T, 8, 8> vm;
                simdgroup_load(vm, vs + 8 * c * hd + 8 * j, hd);
                simdgroup_multiply_accumulate(om[j], pm[c], vm, om[j]);
            }
        }
    }
    // out = O / l through the scratch rows: lane (r, part) writes dims part, part + 4, ... of row r
    simdgroup_barrier(mem_flags::mem_threadgroup);
    for (uint j = 0; j < nd; j++) simdgroup_store(om[j], mine, sw, ulong2(8 * j, 0));
    simdgroup_barrier(mem_flags::mem_threadgroup);
    const uint row = q0 + sg * 8 + r;
    if (row >= p.nq) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key (n = 0): zeros, not 1 / 0
    for (uint d = part; d < hd; d += 4) o[row * p.ldo + head * hd + d] = A(mine[r * sw + d] * inv);
}

kernel void attention_flash_64(device const float* q [[buffer(0)]], device const float* k [[buffer(1)]],
                               device const float* v [[buffer(2)]], device float* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<64, float, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_72(device const float* q [[buffer(0)]], device const float* k [[buffer(1)]],
                               device const float* v [[buffer(2)]], device float* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<72, float, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_80(device const float* q [[buffer(0)]], device const float* k [[buffer(1)]],
                               device const float* v [[buffer(2)]], device float* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<80, float, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash(device const float* q [[buffer(0)]], device const float* k [[buffer(1)]],
                            device const float* v [[buffer(2)]], device float* o [[buffer(3)]],
                            constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                            uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                            uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<0, float, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}

template <typename A>
inline void segment(device const A* q, device const A* k, device const A* v, device A* o, constant kargs::Attention& p,
                    threadgroup float* tg, uint2 gp, uint tid, uint sg, uint lane)
{
    const uint hd = p.head_dim, kb = p.kblock, head = gp.y;
    threadgroup float* ks = tg;                  // [kb][hd]
    threadgroup float* vs = ks + kb * hd;        // [kb][hd]
    threadgroup float* qs = vs + kb * hd;        // [4][hd]
    threadgroup float* ps = qs + 4 * hd;         // [4][kb]
    const uint row = gp.x * kargs::kAttnRowsPerGroup + sg;
    const bool live = row < p.nq;
    for (uint d = lane; d < hd; d += 32) qs[sg * hd + d] = live ? float(q[row * p.ldq + head * hd + d]) * p.scale : 0.0f;
    float m = kNoScore, l = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint k0 = 0; k0 < p.n; k0 += kb) {
        threadgroup_barrier(mem_flags::mem_threadgroup);       // the previous tile is no longer read
        for (uint i = tid; i < kb * hd; i += kargs::kAttnThreads) {
            const uint j = i / hd, d = i % hd, key = k0 + j;
            ks[i] = key < p.n ? float(k[key * p.ldk + head * hd + d]) : 0.0f;
            vs[i] = key < p.n ? float(v[key * p.ldv + head * hd + d]) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const bool has_key = lane < kb && k0 + lane < p.n;
        float s = kNoScore;
        if (has_key) {
            s = 0.0f;
            for (uint d = 0; d < hd; d++) s += qs[sg * hd + d] * ks[lane * hd + d];
        }
        const float m_new = max(m, simd_max(s));                // finite: the tile has at least one key
        const float pj = has_key ? precise::exp(s - m_new) : 0.0f;
        const float corr = precise::exp(m - m_new);             // 0 on the first tile (m = kNoScore)
        l = l * corr + simd_sum(pj);
        if (lane < kb) ps[sg * kb + lane] = pj;
        simdgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = 0; i < 4; i++) {
            const uint d = lane + 32 * i;
            if (d >= hd) break;
            float a = acc[i] * corr;
            for (uint j = 0; j < kb; j++) a += ps[sg * kb + j] * vs[j * hd + d];
            acc[i] = a;
        }
        m = m_new;
    }
    if (!live) return;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key (n = 0): zeros, not 1 / 0
    for (uint i = 0; i < 4; i++) {
        const uint d = lane + 32 * i;
        if (d < hd) o[row * p.ldo + head * hd + d] = A(acc[i] * inv);
    }
}

kernel void attention_segment(device const float* q [[buffer(0)]], device const float* k [[buffer(1)]],
                               device const float* v [[buffer(2)]], device float* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    segment<float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_64_h(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<64, half, half>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_72_h(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<72, half, half>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_80_h(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<80, half, half>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_h(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<0, half, half>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_64_hs(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<64, half, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_72_hs(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<72, half, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_80_hs(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<80, half, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_hs(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<0, half, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_segment_h(device const half* q [[buffer(0)]], device const half* k [[buffer(1)]],
                               device const half* v [[buffer(2)]], device half* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    segment<half>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
// Precision 'bf16' (MSL 3.1): q, k, v and out bfloat; _b stages K and V as bfloat, _bs as float (AttnProducts::F32).
#if defined(__HAVE_BFLOAT__)
kernel void attention_flash_64_b(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<64, bfloat, bfloat>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_72_b(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<72, bfloat, bfloat>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_80_b(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<80, bfloat, bfloat>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_b(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<0, bfloat, bfloat>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_64_bs(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<64, bfloat, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_72_bs(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<72, bfloat, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_80_bs(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<80, bfloat, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_flash_bs(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    flash<0, bfloat, float>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
kernel void attention_segment_b(device const bfloat* q [[buffer(0)]], device const bfloat* k [[buffer(1)]],
                               device const bfloat* v [[buffer(2)]], device bfloat* o [[buffer(3)]],
                               constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                               uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    segment<bfloat>(q, k, v, o, p, tg, gp, tid, sg, lane);
}
#endif  // __HAVE_BFLOAT__
