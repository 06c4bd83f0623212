// Planted lint errors: `node tools/mslemu/lint.mjs` must reject this file with exactly the errors listed
// in test/metal-emulator.test.ts (one per BUG line; the bfloat kernel at the end only as the Metal 3.0 library sees it), each at its line.
#include <metal_stdlib>
using namespace metal;
inline float tg_sum4(threadgroup const float* p) { return p[0] + p[1] + p[2] + p[3]; }
inline void write_dev(device float* p, float v) { p[0] = v; }
kernel void addr_space_bad(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           constant float& k [[buffer(2)]], uint tid [[thread_position_in_threadgroup]])
{
    if (tid == 0) y[0] = tg_sum4(x);        // BUG: device pointer passed as threadgroup
    thread float local[4] = {1, 2, 3, 4};
    write_dev(local, k);                    // BUG: thread pointer passed as device
    device float* w = (device float*)&k;    // BUG: C-style cast away from the constant address space
    w[0] = 1.0f;
    float d = k * 0.1;                      // BUG: double promotion (no double on the GPU)
    y[1] = d;
    float4 v(1.0f, 2.0f, 3.0f, 4.0f);       // BUG: direct-initialised vector (a cast in clang)
    y[2] = v.x;
}
kernel void no_space(float* x [[buffer(0)]], device float* y [[buffer(0)]])   // BUG x2: no address space; index 0 twice
{
    y[0] = x[0];
}
kernel void bfloat_bad(device const bfloat* x [[buffer(0)]], device bfloat* y [[buffer(1)]])  // BUG: bfloat outside #if defined(__HAVE_BFLOAT__)
{
    y[0] = float(x[0]) * 2.0f;              // BUG: float into bfloat without a conversion
}
