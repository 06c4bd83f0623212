// Weighted row gathers: position tables (Qwen's bilinear taps, Gemma's X/Y tables), the 2x2 merge
// permutation and 3x3 pooling, all as y[r, c] (+)= Σ_t w[r, t] · table[idx[r, t], c] with t in order from
// 0 (idx < 0 contributes nothing). One thread per output element, grid (cols, rows).
// Precision 'f16' (gather_sum_h): y is half in device memory; the sum runs in float.
#include "kernel_common.h"

template <typename A>
inline void gather_sum_body(device A* y, device const uchar* table, device const int* idx, device const float* wt, constant kargs::Gather& p, uint2 gid)
{
    if (gid.x >= p.cols || gid.y >= p.rows) return;
    device A* out = y + gid.y * p.ldy + gid.x;
    float s = p.accumulate != 0 ? float(*out) : 0.0f;   // the CPU backend's order: y, then each tap in turn
    for (uint t = 0; t < p.taps; t++) {
        const int r = idx[gid.y * p.taps + t];
        if (r < 0 || uint(r) >= p.table_rows) continue;
        s += wt[gid.y * p.taps + t] * load_any(table, p.table_type, uint(r) * p.ldt + gid.x);
    }
    *out = A(s);
}
kernel void gather_sum(device float* y [[buffer(0)]], device const uchar* table [[buffer(1)]],
                       device const int* idx [[buffer(2)]], device const float* wt [[buffer(3)]],
                       constant kargs::Gather& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    gather_sum_body<float>(y, table, idx, wt, p, gid);
}
kernel void gather_sum_h(device half* y [[buffer(0)]], device const uchar* table [[buffer(1)]],
                       device const int* idx [[buffer(2)]], device const float* wt [[buffer(3)]],
                       constant kargs::Gather& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    gather_sum_body<half>(y, table, idx, wt, p, gid);
}
// Precision 'bf16' (MSL 3.1): y bfloat, the sum in float.
#if defined(__HAVE_BFLOAT__)
kernel void gather_sum_b(device bfloat* y [[buffer(0)]], device const uchar* table [[buffer(1)]],
                       device const int* idx [[buffer(2)]], device const float* wt [[buffer(3)]],
                       constant kargs::Gather& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    gather_sum_body<bfloat>(y, table, idx, wt, p, gid);
}
#endif  // __HAVE_BFLOAT__
