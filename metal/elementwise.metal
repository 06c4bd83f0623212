// Element-wise ops on f32 matrices with row strides: add, and the affine map (a scalar
// shift, per-column sub and mul, a scalar scale) used for input scaling and Gemma's standardisation. One thread per element,
// grid (cols, rows) in threadgroups of 64 x 1 (the host rounds the grid up; tails return).
// Precision 'f16' (the _h kernels): operands and result half in device memory, each step in float.
#include "kernel_common.h"

template <typename A>
inline void ew_binary_body(device const A* a, device const A* b, device A* y, constant kargs::Binary& p, uint2 gid)
{
    if (gid.x >= p.cols || gid.y >= p.rows) return;
    const float u = float(a[gid.y * p.lda + gid.x]), v = float(b[gid.y * p.ldb + gid.x]);
    y[gid.y * p.ldy + gid.x] = A(u + v);
}
kernel void ew_binary(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]], device float* y [[buffer(2)]],
                      constant kargs::Binary& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    ew_binary_body<float>(a, b, y, p, gid);
}
kernel void ew_binary_h(device const half* a [[buffer(0)]], device const half* b [[buffer(1)]], device half* y [[buffer(2)]],
                      constant kargs::Binary& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    ew_binary_body<half>(a, b, y, p, gid);
}

template <typename A>
inline void ew_affine_body(device const A* x, device A* y, device const uchar* sub, device const uchar* mul, constant kargs::Affine& p, uint2 gid)
{
    if (gid.x >= p.cols || gid.y >= p.rows) return;
    float v = float(x[gid.y * p.ldx + gid.x]) - p.shift;
    if (p.has_sub != 0) v = v - load_any(sub, p.sub_type, gid.x);
    if (p.has_mul != 0) v = v * load_any(mul, p.mul_type, gid.x);
    y[gid.y * p.ldy + gid.x] = A(v * p.scale);
}
kernel void ew_affine(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      device const uchar* sub [[buffer(2)]], device const uchar* mul [[buffer(3)]],
                      constant kargs::Affine& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    ew_affine_body<float>(x, y, sub, mul, p, gid);
}
kernel void ew_affine_h(device const half* x [[buffer(0)]], device half* y [[buffer(1)]],
                      device const uchar* sub [[buffer(2)]], device const uchar* mul [[buffer(3)]],
                      constant kargs::Affine& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    ew_affine_body<half>(x, y, sub, mul, p, gid);
}
// Precision 'bf16' (MSL 3.1): operands and result bfloat, each step in float.
#if defined(__HAVE_BFLOAT__)
kernel void ew_binary_b(device const bfloat* a [[buffer(0)]], device const bfloat* b [[buffer(1)]], device bfloat* y [[buffer(2)]],
                      constant kargs::Binary& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    ew_binary_body<bfloat>(a, b, y, p, gid);
}
kernel void ew_affine_b(device const bfloat* x [[buffer(0)]], device bfloat* y [[buffer(1)]],
                      device const uchar* sub [[buffer(2)]], device const uchar* mul [[buffer(3)]],
                      constant kargs::Affine& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    ew_affine_body<bfloat>(x, y, sub, mul, p, gid);
}
#endif  // __HAVE_BFLOAT__
