// LayerNorm and RMSNorm with f32 accumulation (f32 in and out; half in and out in precision 'f16').
//   norm_layer      one threadgroup per row: mean, then variance of (x - mean), two passes over the row
//   norm_rms_row    one threadgroup per row: RMS over the whole row (group == cols)
//   norm_rms_group  one threadgroup per row, one simdgroup per `group` columns at a time (per-head norms)
// The RMS kernels add the residual last (y = res + x / rms · w, backend/backend.h); res and x may alias y: each
// output element is written by the thread that read it, after the row's (or group's) reduction.
// Reductions: per-thread strided partial sums, simd_sum, then the simdgroups' partials summed by lane
// order in simdgroup 0: a fixed order for a given threadgroup size, so results do not depend on scheduling.
// Precision 'f16' (the _h kernels): x, y and the residual are half in device memory; the statistics (sums,
// mean, rstd) and every step stay float, rounded once as y is stored.
#include "kernel_common.h"

// Sum of `v` over the threadgroup; `partial` has one slot per simdgroup (<= 32). Every thread gets the sum.
inline float tg_sum(float v, threadgroup float* partial, uint sg, uint lane, uint nsg) {
    v = simd_sum(v);
    if (lane == 0) partial[sg] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float t = lane < nsg ? partial[lane] : 0.0f;
    t = simd_sum(t);
    threadgroup_barrier(mem_flags::mem_threadgroup);  // partial[] is reused by the next reduction
    return t;
}

// X: x's stored type, Y: y's (and the residual's); they differ only for an f32 residual stream normed into a
// half or bfloat y (the _fh and _fb kernels: backend::ActRange::Stream).
template <typename X, typename Y>
inline void norm_layer_body(device const X* x, device Y* y, device const uchar* w, device const uchar* b, constant kargs::Norm& p, uint row, uint tid, uint nt, uint sg, uint lane, uint nsg, threadgroup float* partial)
{
    device const X* xr = x + row * p.ldx;
    float s = 0.0f;
    for (uint i = tid; i < p.cols; i += nt) s += float(xr[i]);
    const float mean = tg_sum(s, partial, sg, lane, nsg) / float(p.cols);
    float q = 0.0f;
    for (uint i = tid; i < p.cols; i += nt) { const float d = float(xr[i]) - mean; q += d * d; }
    const float rstd = rsqrt(tg_sum(q, partial, sg, lane, nsg) / float(p.cols) + p.eps);
    device Y* yr = y + row * p.ldy;
    for (uint i = tid; i < p.cols; i += nt) {
        float v = (float(xr[i]) - mean) * rstd;
        if (p.has_weight != 0) v = v * load_any(w, p.weight_type, i);
        if (p.has_bias != 0) v = v + load_any(b, p.bias_type, i);
        yr[i] = Y(v);
    }
}
kernel void norm_layer(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* b [[buffer(3)]],
                       constant kargs::Norm& p [[buffer(4)]],
                       uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_layer_body<float, float>(x, y, w, b, p, row, tid, nt, sg, lane, nsg, partial);
}
kernel void norm_layer_h(device const half* x [[buffer(0)]], device half* y [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* b [[buffer(3)]],
                       constant kargs::Norm& p [[buffer(4)]],
                       uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_layer_body<half, half>(x, y, w, b, p, row, tid, nt, sg, lane, nsg, partial);
}

template <typename X, typename Y>
inline void norm_rms_row_body(device const X* x, device Y* y, device const uchar* w, constant kargs::Norm& p, device const Y* res, uint row, uint tid, uint nt, uint sg, uint lane, uint nsg, threadgroup float* partial)
{
    device const X* xr = x + row * p.ldx;
    float q = 0.0f;
    for (uint i = tid; i < p.cols; i += nt) q += float(xr[i]) * float(xr[i]);
    const float rstd = rsqrt(tg_sum(q, partial, sg, lane, nsg) / float(p.cols) + p.eps);
    device Y* yr = y + row * p.ldy;
    device const Y* rr = res + row * p.ldr;
    for (uint i = tid; i < p.cols; i += nt) {
        float v = float(xr[i]) * rstd;
        if (p.has_weight != 0) v = v * load_any(w, p.weight_type, i);
        if (p.has_residual != 0) v = float(rr[i]) + v;
        yr[i] = Y(v);
    }
}
kernel void norm_rms_row(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                         device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                         device const float* res [[buffer(4)]],
                         uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_rms_row_body<float, float>(x, y, w, p, res, row, tid, nt, sg, lane, nsg, partial);
}
kernel void norm_rms_row_h(device const half* x [[buffer(0)]], device half* y [[buffer(1)]],
                         device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                         device const half* res [[buffer(4)]],
                         uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_rms_row_body<half, half>(x, y, w, p, res, row, tid, nt, sg, lane, nsg, partial);
}

template <typename A>
inline void norm_rms_group_body(device const A* x, device A* y, device const uchar* w, constant kargs::Norm& p, device const A* res, uint row, uint sg, uint lane, uint nsg)
{
    device const A* xr = x + row * p.ldx;
    device A* yr = y + row * p.ldy;
    device const A* rr = res + row * p.ldr;
    const uint groups = p.cols / p.group;
    for (uint g = sg; g < groups; g += nsg) {          // uniform per simdgroup
        device const A* xg = xr + g * p.group;
        float q = 0.0f;
        for (uint i = lane; i < p.group; i += 32) q += float(xg[i]) * float(xg[i]);
        const float rstd = rsqrt(simd_sum(q) / float(p.group) + p.eps);
        for (uint i = lane; i < p.group; i += 32) {
            float v = float(xg[i]) * rstd;
            if (p.has_weight != 0) v = v * load_any(w, p.weight_type, i);
            if (p.has_residual != 0) v = float(rr[g * p.group + i]) + v;
            yr[g * p.group + i] = A(v);
        }
    }
}
kernel void norm_rms_group(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                           device const float* res [[buffer(4)]],
                           uint row [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                           uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    norm_rms_group_body<float>(x, y, w, p, res, row, sg, lane, nsg);
}
kernel void norm_rms_group_h(device const half* x [[buffer(0)]], device half* y [[buffer(1)]],
                           device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                           device const half* res [[buffer(4)]],
                           uint row [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                           uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    norm_rms_group_body<half>(x, y, w, p, res, row, sg, lane, nsg);
}
// Precision 'f16' with the residual stream f32 (backend::ActRange::Stream): an f32 x normed into a half y.
kernel void norm_layer_fh(device const float* x [[buffer(0)]], device half* y [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* b [[buffer(3)]],
                       constant kargs::Norm& p [[buffer(4)]],
                       uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_layer_body<float, half>(x, y, w, b, p, row, tid, nt, sg, lane, nsg, partial);
}
kernel void norm_rms_row_fh(device const float* x [[buffer(0)]], device half* y [[buffer(1)]],
                         device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                         device const half* res [[buffer(4)]],
                         uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_rms_row_body<float, half>(x, y, w, p, res, row, tid, nt, sg, lane, nsg, partial);
}
// Precision 'bf16' (MSL 3.1): x, y and the residual bfloat, every step in float; _fb: an f32 x (the residual
// stream) into a bfloat y.
#if defined(__HAVE_BFLOAT__)
kernel void norm_layer_b(device const bfloat* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* b [[buffer(3)]],
                       constant kargs::Norm& p [[buffer(4)]],
                       uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_layer_body<bfloat, bfloat>(x, y, w, b, p, row, tid, nt, sg, lane, nsg, partial);
}
kernel void norm_rms_row_b(device const bfloat* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                         device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                         device const bfloat* res [[buffer(4)]],
                         uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_rms_row_body<bfloat, bfloat>(x, y, w, p, res, row, tid, nt, sg, lane, nsg, partial);
}
kernel void norm_rms_group_b(device const bfloat* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                           device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                           device const bfloat* res [[buffer(4)]],
                           uint row [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                           uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    norm_rms_group_body<bfloat>(x, y, w, p, res, row, sg, lane, nsg);
}
kernel void norm_layer_fb(device const float* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                       device const uchar* w [[buffer(2)]], device const uchar* b [[buffer(3)]],
                       constant kargs::Norm& p [[buffer(4)]],
                       uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_layer_body<float, bfloat>(x, y, w, b, p, row, tid, nt, sg, lane, nsg, partial);
}
kernel void norm_rms_row_fb(device const float* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                         device const uchar* w [[buffer(2)]], constant kargs::Norm& p [[buffer(3)]],
                         device const bfloat* res [[buffer(4)]],
                         uint row [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float partial[32];
    norm_rms_row_body<float, bfloat>(x, y, w, p, res, row, tid, nt, sg, lane, nsg, partial);
}
#endif  // __HAVE_BFLOAT__
