// Element-wise ops on f32 matrices with row strides: add, and the affine map (a scalar
// shift, per-column sub and mul, a scalar scale) used for input scaling and Gemma's standardisation. One thread per element,
// grid (cols, rows) in threadgroups of 64 x 1 (the host rounds the grid up; tails return).
#include "kernel_common.h"

kernel void ew_binary(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]], device float* y [[buffer(2)]],
                      constant kargs::Binary& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    if (gid.x >= p.cols || gid.y >= p.rows) return;
    const float u = a[gid.y * p.lda + gid.x], v = b[gid.y * p.ldb + gid.x];
    y[gid.y * p.ldy + gid.x] = u + v;
}

kernel void ew_affine(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      device const uchar* sub [[buffer(2)]], device const uchar* mul [[buffer(3)]],
                      constant kargs::Affine& p [[buffer(4)]], uint2 gid [[thread_position_in_grid]])
{
    if (gid.x >= p.cols || gid.y >= p.rows) return;
    float v = x[gid.y * p.ldx + gid.x] - p.shift;
    if (p.has_sub != 0) v = v - load_any(sub, p.sub_type, gid.x);
    if (p.has_mul != 0) v = v * load_any(mul, p.mul_type, gid.x);
    y[gid.y * p.ldy + gid.x] = v * p.scale;
}
