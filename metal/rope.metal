// Rotary position embedding in place (Qwen: 1 section over the head; Gemma: 2 axial sections). Within a
// section of size s, lanes j and j + s/2 rotate together with their own cos/sin entries:
//   x_j' = x_j cos_j - x_{j+s/2} sin_j,   x_{j+s/2}' = x_{j+s/2} cos_{j+s/2} + x_j sin_{j+s/2}.
//   rope_apply  one thread per pair: grid (heads * head_dim / 2, rows). Each thread reads and writes only its own pair.
//   rope_norm   each head RMS-normed first (gpu::HeadNorm): one threadgroup per row, one simdgroup per head at a
//               time, each lane owning the pairs k = lane, lane + 32, ...: it sums their squares, the simd_sum
//               gives the head's 1 / rms, and it scales, rotates and writes back only its own pairs.
// Precision 'f16' (the _h kernels): x is half in device memory; the tables (cos, sin: the angles) are float,
// and the norm's statistics and the rotation run in float, rounded once as x is stored.
#include "kernel_common.h"

// Positions within the head of pair k (< head_dim / 2): lanes a and a + half of its section.
inline uint2 rope_pair(uint k, constant kargs::Rope& p) {
    const uint sec = p.head_dim / p.sections, half_sec = sec / 2;
    const uint a = (k / half_sec) * sec + k % half_sec;
    return uint2(a, a + half_sec);
}

template <typename A>
inline void rope_apply_body(device A* x, device const float* cs, device const float* sn, constant kargs::Rope& p, uint2 gid)
{
    const uint half_dim = p.head_dim / 2;
    if (gid.x >= p.heads * half_dim || gid.y >= p.rows) return;
    const uint head = gid.x / half_dim, k = gid.x % half_dim;
    const uint2 ab = rope_pair(k, p);
    const uint a = ab.x, b = ab.y;
    device A* xh = x + gid.y * p.ldx + head * p.head_dim;
    device const float* c = cs + gid.y * p.ldc;
    device const float* s = sn + gid.y * p.ldc;
    const float xa = float(xh[a]), xb = float(xh[b]);
    xh[a] = A(xa * c[a] - xb * s[a]);
    xh[b] = A(xb * c[b] + xa * s[b]);
}
kernel void rope_apply(device float* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                       constant kargs::Rope& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    rope_apply_body<float>(x, cs, sn, p, gid);
}
kernel void rope_apply_h(device half* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                       constant kargs::Rope& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    rope_apply_body<half>(x, cs, sn, p, gid);
}

template <typename A>
inline void rope_norm_body(device A* x, device const float* cs, device const float* sn, constant kargs::Rope& p, device const uchar* w, uint row, uint sg, uint lane, uint nsg)
{
    const uint half_dim = p.head_dim / 2;
    device const float* c = cs + row * p.ldc;
    device const float* s = sn + row * p.ldc;
    for (uint head = sg; head < p.heads; head += nsg) {  // uniform per simdgroup
        device A* xh = x + row * p.ldx + head * p.head_dim;
        float q = 0.0f;
        for (uint k = lane; k < half_dim; k += 32) {
            const uint2 ab = rope_pair(k, p);
            q += float(xh[ab.x]) * float(xh[ab.x]) + float(xh[ab.y]) * float(xh[ab.y]);
        }
        const float rstd = rsqrt(simd_sum(q) / float(p.head_dim) + p.eps);
        for (uint k = lane; k < half_dim; k += 32) {
            const uint2 ab = rope_pair(k, p);
            float xa = float(xh[ab.x]) * rstd, xb = float(xh[ab.y]) * rstd;
            if (p.has_weight != 0) {
                xa = xa * load_any(w, p.weight_type, ab.x);
                xb = xb * load_any(w, p.weight_type, ab.y);
            }
            xh[ab.x] = A(xa * c[ab.x] - xb * s[ab.x]);
            xh[ab.y] = A(xb * c[ab.y] + xa * s[ab.y]);
        }
    }
}
kernel void rope_norm(device float* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                      constant kargs::Rope& p [[buffer(3)]], device const uchar* w [[buffer(4)]],
                      uint row [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    rope_norm_body<float>(x, cs, sn, p, w, row, sg, lane, nsg);
}
kernel void rope_norm_h(device half* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                      constant kargs::Rope& p [[buffer(3)]], device const uchar* w [[buffer(4)]],
                      uint row [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    rope_norm_body<half>(x, cs, sn, p, w, row, sg, lane, nsg);
}
// Precision 'bf16' (MSL 3.1): x bfloat, the angles and every step in float.
#if defined(__HAVE_BFLOAT__)
kernel void rope_apply_b(device bfloat* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                       constant kargs::Rope& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    rope_apply_body<bfloat>(x, cs, sn, p, gid);
}
kernel void rope_norm_b(device bfloat* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                      constant kargs::Rope& p [[buffer(3)]], device const uchar* w [[buffer(4)]],
                      uint row [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    rope_norm_body<bfloat>(x, cs, sn, p, w, row, sg, lane, nsg);
}
#endif  // __HAVE_BFLOAT__
