// out = softmax(q kᵀ · scale) v for one segment (rows that attend to each other: one image), every head.
// Tiled with an online softmax, memory O(rows x head_dim): a threadgroup of 4 simdgroups takes 4 query rows
// of one head (grid: ceil(n / 4) x heads); keys and values pass through threadgroup memory `kblock` rows at
// a time ([[threadgroup(0)]]: K tile, V tile, the 4 scaled query rows, the 4 rows of probabilities).
// In a simdgroup, lane j scores key j of the tile; lanes own output dims lane, lane + 32, ... (head_dim <= 128).
// Query rows past the segment still take part in every barrier and collective; they only skip the store.
// p.n keys; p.nq query rows (p.n for a segment, or a chunk of queries against all its keys: grid ceil(nq / 4).
#include "kernel_common.h"

kernel void attention_segment(device const float* q [[buffer(0)]], device const float* k [[buffer(1)]],
                              device const float* v [[buffer(2)]], device float* o [[buffer(3)]],
                              constant kargs::Attention& p [[buffer(4)]], threadgroup float* tg [[threadgroup(0)]],
                              uint2 gp [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                              uint sg [[simdgroup_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]])
{
    const uint hd = p.head_dim, kb = p.kblock, head = gp.y;
    threadgroup float* ks = tg;                  // [kb][hd]
    threadgroup float* vs = ks + kb * hd;        // [kb][hd]
    threadgroup float* qs = vs + kb * hd;        // [4][hd]
    threadgroup float* ps = qs + 4 * hd;         // [4][kb]
    const uint row = gp.x * 4 + sg;
    const bool live = row < p.nq;
    for (uint d = lane; d < hd; d += 32) qs[sg * hd + d] = live ? q[row * p.ldq + head * hd + d] * p.scale : 0.0f;
    float m = -INFINITY, l = 0.0f;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint k0 = 0; k0 < p.n; k0 += kb) {
        threadgroup_barrier(mem_flags::mem_threadgroup);       // the previous tile is no longer read
        for (uint i = tid; i < kb * hd; i += 128) {
            const uint j = i / hd, d = i % hd, key = k0 + j;
            ks[i] = key < p.n ? k[key * p.ldk + head * hd + d] : 0.0f;
            vs[i] = key < p.n ? v[key * p.ldv + head * hd + d] : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const bool has_key = lane < kb && k0 + lane < p.n;
        float s = -INFINITY;
        if (has_key) {
            s = 0.0f;
            for (uint d = 0; d < hd; d++) s += qs[sg * hd + d] * ks[lane * hd + d];
        }
        const float m_new = max(m, simd_max(s));                // finite: the tile has at least one key
        const float pj = has_key ? precise::exp(s - m_new) : 0.0f;
        const float corr = precise::exp(m - m_new);             // 0 on the first tile (m = -inf)
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
    const float inv = 1.0f / l;
    for (uint i = 0; i < 4; i++) {
        const uint d = lane + 32 * i;
        if (d < hd) o[row * p.ldo + head * hd + d] = acc[i] * inv;
    }
}
