// Rotary position embedding in place (Qwen: 1 section over the head; Gemma: 2 axial sections). Within a
// section of size s, lanes j and j + s/2 rotate together with their own cos/sin entries:
//   x_j' = x_j cos_j - x_{j+s/2} sin_j,   x_{j+s/2}' = x_{j+s/2} cos_{j+s/2} + x_j sin_{j+s/2}.
// One thread per pair: grid (heads * head_dim / 2, rows). Each thread reads and writes only its own pair.
#include "kernel_common.h"

kernel void rope_apply(device float* x [[buffer(0)]], device const float* cs [[buffer(1)]], device const float* sn [[buffer(2)]],
                       constant kargs::Rope& p [[buffer(3)]], uint2 gid [[thread_position_in_grid]])
{
    const uint half_dim = p.head_dim / 2;
    if (gid.x >= p.heads * half_dim || gid.y >= p.rows) return;
    const uint head = gid.x / half_dim, k = gid.x % half_dim;
    const uint sec = p.head_dim / p.sections, half_sec = sec / 2;
    const uint a = (k / half_sec) * sec + k % half_sec, b = a + half_sec;  // positions within the head
    device float* xh = x + gid.y * p.ldx + head * p.head_dim;
    device const float* c = cs + gid.y * p.ldc;
    device const float* s = sn + gid.y * p.ldc;
    const float xa = xh[a], xb = xh[b];
    xh[a] = xa * c[a] - xb * s[a];
    xh[b] = xb * c[b] + xa * s[b];
}
