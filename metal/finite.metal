// The finite check of a stage's output on the GPU (gpu::Backend::check_finite; native/metal/metal_backend.cc):
// counts the non-finite values of an f32 matrix into counts[0] and the flat index (row * cols + col) of the
// first into counts[1] (the host sets them to 0 and 0xFFFFFFFF). Recorded in the stage's own command buffer
// and read at the backend's next wait, so the check adds no round trip.
//
// Fast math may fold isnan / isinf away (the compiler assumes neither occurs), so the test is on the bits: an
// f32 is infinite or NaN exactly when its exponent field is all ones. One thread per element, grid (cols,
// rows) in threadgroups of 64 x 1; each simdgroup sums its count and takes its smallest index, and one lane
// adds them to the counters.
#include "kernel_common.h"

kernel void count_nonfinite(device const float* x [[buffer(0)]], device atomic_uint* counts [[buffer(1)]],
                            constant kargs::Finite& p [[buffer(2)]], uint2 gid [[thread_position_in_grid]],
                            uint lane [[thread_index_in_simdgroup]])
{
    const bool inside = gid.x < p.cols && gid.y < p.rows;
    const uint bits = inside ? as_type<uint>(x[gid.y * p.ldx + gid.x]) : 0u;
    const bool bad = (bits & 0x7f800000u) == 0x7f800000u;
    const uint n = simd_sum(bad ? 1u : 0u);
    const uint first = simd_min(bad ? gid.y * p.cols + gid.x : 0xFFFFFFFFu);
    if (lane == 0 && n != 0) {
        atomic_fetch_add_explicit(&counts[0], n, memory_order_relaxed);
        atomic_fetch_min_explicit(&counts[1], first, memory_order_relaxed);
    }
}
// Precision 'f16': half's exponent bits all set (0x7c00) is an infinity or a NaN.
kernel void count_nonfinite_h(device const half* x [[buffer(0)]], device atomic_uint* counts [[buffer(1)]],
                              constant kargs::Finite& p [[buffer(2)]], uint2 gid [[thread_position_in_grid]],
                              uint lane [[thread_index_in_simdgroup]])
{
    const bool inside = gid.x < p.cols && gid.y < p.rows;
    const ushort bits = inside ? as_type<ushort>(x[gid.y * p.ldx + gid.x]) : ushort(0);
    const bool bad = (bits & ushort(0x7c00)) == ushort(0x7c00);
    const uint n = simd_sum(bad ? 1u : 0u);
    const uint first = simd_min(bad ? gid.y * p.cols + gid.x : 0xFFFFFFFFu);
    if (lane == 0 && n != 0) {
        atomic_fetch_add_explicit(&counts[0], n, memory_order_relaxed);
        atomic_fetch_min_explicit(&counts[1], first, memory_order_relaxed);
    }
}
// Precision 'bf16': bfloat is the top half of an f32, so its exponent bits all set (0x7f80) is an infinity or a NaN.
#if defined(__HAVE_BFLOAT__)
kernel void count_nonfinite_b(device const bfloat* x [[buffer(0)]], device atomic_uint* counts [[buffer(1)]],
                              constant kargs::Finite& p [[buffer(2)]], uint2 gid [[thread_position_in_grid]],
                              uint lane [[thread_index_in_simdgroup]])
{
    const bool inside = gid.x < p.cols && gid.y < p.rows;
    const ushort bits = inside ? as_type<ushort>(x[gid.y * p.ldx + gid.x]) : ushort(0);
    const bool bad = (bits & ushort(0x7f80)) == ushort(0x7f80);
    const uint n = simd_sum(bad ? 1u : 0u);
    const uint first = simd_min(bad ? gid.y * p.cols + gid.x : 0xFFFFFFFFu);
    if (lane == 0 && n != 0) {
        atomic_fetch_add_explicit(&counts[0], n, memory_order_relaxed);
        atomic_fetch_min_explicit(&counts[1], first, memory_order_relaxed);
    }
}
#endif  // __HAVE_BFLOAT__
