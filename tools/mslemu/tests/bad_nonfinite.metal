// Planted fast-math violations (test/metal-emulator.test.ts): each line below must be reported by the lint.
// INFINITY, NAN, isinf and isnan in comments are fine: comments are not tokens.
#include <metal_stdlib>
using namespace metal;

kernel void planted_nonfinite(device float* y [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float m = -INFINITY;
    float q = NAN;
    if (isinf(y[i]) || isnan(y[i])) y[i] = 0.0f;
    y[i] = max(m, q);
}
