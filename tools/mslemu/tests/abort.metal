// Kernels that end the process (self-test `--abort NAME`): the emulator must say what happened and where.
#include <metal_stdlib>
using namespace metal;

// Waits for a flag nobody sets: on a GPU a hang; cooperative fibers can never make it succeed, so the
// watchdog reports the lane (TESSERA_MSLEMU_WATCHDOG_S seconds without reaching a barrier or collective).
kernel void spin_wait(device atomic_uint* flag [[buffer(0)]], device uint* y [[buffer(1)]], uint tid [[thread_index_in_threadgroup]])
{
    threadgroup_barrier(mem_flags::mem_none);
    while (atomic_load_explicit(flag, memory_order_relaxed) == 0u) {
    }
    y[tid] = 1u;
}

// Integer division by a zero read from memory: an unspecified value in MSL, a SIGFPE on x86.
kernel void div_zero(device const uint* x [[buffer(0)]], device uint* y [[buffer(1)]], uint tid [[thread_index_in_threadgroup]])
{
    y[tid] = 100u / x[tid];
}
