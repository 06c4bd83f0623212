#include <metal_stdlib>
using namespace metal;

// Race: reads neighbour's slot without a barrier.
kernel void race_missing_barrier(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                 uint tid [[thread_position_in_threadgroup]], uint n [[threads_per_threadgroup]])
{
    threadgroup float t[256];
    t[tid] = x[tid] * 2.0f;
    // threadgroup_barrier(mem_flags::mem_threadgroup);   <- forgotten
    y[tid] = t[(tid + 1) % n];
}

// Race across SIMD collectives: partial[] is overwritten while other simdgroups may still be reading it.
kernel void reuse_without_barrier(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                  uint tid [[thread_index_in_threadgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                                  uint lane [[thread_index_in_simdgroup]])
{
    threadgroup float partial[4];
    float s = simd_sum(x[tid]);
    if (lane == 0) partial[sg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float total = simd_sum(lane < 4 ? partial[lane] : 0.0f);
    // threadgroup_barrier(mem_flags::mem_threadgroup);   <- forgotten: everyone must have read partial[]
    float q = simd_sum(x[tid] * x[tid]);
    if (lane == 0) partial[sg] = q;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = total + simd_sum(lane < 4 ? partial[lane] : 0.0f);
}

// Reads threadgroup memory that nobody wrote (only 64 of 128 slots are written).
kernel void uninit_read(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                        uint tid [[thread_position_in_threadgroup]])
{
    threadgroup float t[128];
    if (tid < 64) t[tid] = x[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = t[127 - tid];
}

// Early return before a barrier.
kernel void early_return_barrier(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                                 constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                                 uint tid [[thread_position_in_threadgroup]])
{
    threadgroup float t[64];
    if (gid >= n) return;
    t[tid] = x[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[gid] = t[0];
}

// Barrier inside divergent control flow: two different barriers.
kernel void divergent_barrier(device float* y [[buffer(0)]], uint tid [[thread_position_in_threadgroup]])
{
    if (tid < 16) { threadgroup_barrier(mem_flags::mem_threadgroup); y[tid] = 1.0f; }
    else          { threadgroup_barrier(mem_flags::mem_threadgroup); y[tid] = 2.0f; }
}

// simdgroup matrix op under divergent control flow.
kernel void divergent_matrix(device float* y [[buffer(0)]], uint lane [[thread_index_in_simdgroup]])
{
    simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8>(1.0f);
    if (lane < 16) simdgroup_store(m, y, 8);
}

// Some lanes return, then the rest use a simdgroup_matrix op: the op needs every launched lane.
kernel void matrix_after_early_return(device float* y [[buffer(0)]], uint lane [[thread_index_in_simdgroup]])
{
    if (lane == 31) return;
    simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8>(1.0f);
    simdgroup_store(m, y, 8);
}

// Simdgroup 0 waits in a collective for lanes that wait at a barrier the other simdgroup never reaches.
kernel void divergent_collective_deadlock(device float* y [[buffer(0)]], uint tid [[thread_index_in_threadgroup]],
                                          uint sg [[simdgroup_index_in_threadgroup]])
{
    if (sg == 0) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        y[tid] = 1.0f;
    } else {
        float s = simd_sum(1.0f);
        while (s > 0.0f) s = simd_max(s - 1.0f);   // counts down, then waits at a different barrier
        threadgroup_barrier(mem_flags::mem_device);
        y[tid] = s;
    }
}

struct TwoUints { uint a, b; };
// The host bound a 4-byte buffer where the kernel reads an 8-byte struct.
kernel void constant_too_small(device float* y [[buffer(0)]], constant TwoUints& p [[buffer(1)]], uint tid [[thread_index_in_threadgroup]])
{
    y[tid] = float(p.a + p.b);
}

// Reads a buffer index the host never bound.
kernel void unbound_buffer(device float* y [[buffer(0)]], device const float* x [[buffer(2)]], uint tid [[thread_index_in_threadgroup]])
{
    y[tid] = x[tid];
}

// Declares more threadgroup memory than Apple silicon has.
kernel void tg_overflow(device float* y [[buffer(0)]], uint tid [[thread_index_in_threadgroup]])
{
    threadgroup float big[9000];
    big[tid] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = big[(tid + 1) % 32];
}
