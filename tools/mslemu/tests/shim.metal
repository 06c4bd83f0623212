// Unit tests of the MSL shim: one kernel per group of builtins; tests/selftest.cpp holds the references.
// Every function the project's kernels use is here (and more); the order of the OUT() slots must match
// the tables in selftest.cpp.
#include <metal_stdlib>
using namespace metal;

// y[k * n + i] for slot k, element i; x in [-3, 3], p in (0.05, 4]
#define OUT(k, e) y[(k) * n + i] = (e)
kernel void shim_math_scalar(device const float* xs [[buffer(0)]], device const float* ps [[buffer(1)]],
                             device float* y [[buffer(2)]], constant uint& n [[buffer(3)]],
                             uint i [[thread_position_in_grid]])
{
    if (i >= n) return;
    const float x = xs[i], p = ps[i];
    OUT(0, exp(x)); OUT(1, exp2(x)); OUT(2, exp10(x)); OUT(3, log(p)); OUT(4, log2(p)); OUT(5, log10(p));
    OUT(6, sqrt(p)); OUT(7, rsqrt(p)); OUT(8, sin(x)); OUT(9, cos(x)); OUT(10, tan(x)); OUT(11, asin(x / 3.0f));
    OUT(12, acos(x / 3.0f)); OUT(13, atan(x)); OUT(14, sinh(x)); OUT(15, cosh(x)); OUT(16, tanh(x)); OUT(17, floor(x));
    OUT(18, ceil(x)); OUT(19, trunc(x)); OUT(20, round(x)); OUT(21, rint(x)); OUT(22, fabs(x)); OUT(23, fract(x));
    OUT(24, sign(x)); OUT(25, saturate(x)); OUT(26, pow(p, x)); OUT(27, powr(p, x)); OUT(28, atan2(x, p)); OUT(29, fmod(x, p));
    OUT(30, copysign(p, x)); OUT(31, fmin(x, p)); OUT(32, fmax(x, p)); OUT(33, step(p, x)); OUT(34, abs(x)); OUT(35, max(x, p));
    OUT(36, min(x, p)); OUT(37, clamp(x, -1.0f, p)); OUT(38, mix(x, p, 0.25f)); OUT(39, fma(x, p, 1.0f));
    OUT(40, fast::exp(x)); OUT(41, precise::exp(x)); OUT(42, fast::tanh(x)); OUT(43, precise::rsqrt(p)); OUT(44, select(x, p, x > 0.0f));
    OUT(45, float(isnan(x / 0.0f))); OUT(46, float(isinf(x / 0.0f))); OUT(47, float(isfinite(x)));
    OUT(48, as_type<float>(as_type<uint>(x) ^ 0x80000000u)); OUT(49, float(as_type<ushort>(half(x))));
}

// The same functions on vectors: element-wise, with vector-scalar forms.
kernel void shim_math_vector(device const float4* xs [[buffer(0)]], device float4* y [[buffer(1)]],
                             constant uint& n [[buffer(2)]], uint i [[thread_position_in_grid]])
{
    if (i >= n) return;
    const float4 x = xs[i];
    const float4 p = fabs(x) + 0.5f;
    OUT(0, exp(x)); OUT(1, log(p)); OUT(2, sqrt(p)); OUT(3, rsqrt(p)); OUT(4, tanh(x)); OUT(5, max(x, 0.5f));
    OUT(6, min(x, p)); OUT(7, clamp(x, -1.0f, 1.0f)); OUT(8, mix(x, p, 0.5f)); OUT(9, fma(x, p, x)); OUT(10, abs(x));
    OUT(11, select(x, p, x < 0.0f)); OUT(12, float4(dot(x, p), length(x), distance(x, p), float(all(x < 10.0f))));
    OUT(13, normalize(p)); OUT(14, float4(float(any(x > 2.9f)), float(all(x > -3.5f)), 0.0f, 0.0f)); OUT(15, floor(x));
    OUT(16, pow(p, x)); OUT(17, exp2(x)); OUT(18, sin(x)); OUT(19, cos(x));
}

// Vector constructors and conversions (the pre-pass rewrite), swizzles, half rounding, literals.
kernel void shim_vectors(device const int4* xi [[buffer(0)]], device float4* y [[buffer(1)]], device half4* yh [[buffer(2)]],
                         device uint4* yu [[buffer(3)]], uint i [[thread_position_in_grid]])
{
    if (i != 0) return;
    const int4 a = xi[0];
    y[0] = float4(a);                        // value conversion: (1, -2, 3, 40000)
    y[1] = float4(float2(a.xy), 0.5f, 1.0f); // concatenation
    y[2] = float4(2.5f);                     // splat
    float4 s = float4(a.wzyx);               // swizzle then convert
    s.xy = s.yx;                             // lvalue swizzle
    y[3] = s;
    const half b = 0.0009765625h;            // 2^-10: 1 + b + b (exact either way; shim_half_rounding tests rounding)
    half acc = 1.0h;
    acc = acc + b;
    acc = acc + b;
    y[4] = float4(float(acc), float(half(0.1f)), float(half(65504.0f) * 2.0h), float(half3(1.0h, 2.0h, 3.0h).z));
    yh[0] = half4(y[0]);                     // float4 -> half4 rounds: 40000 -> 40000 (exact), others exact
    yh[1] = half4(float4(0.1f, 1.0f / 3.0f, 3.14159265f, 100000.0f));
    yu[0] = uint4(float4(1.9f, 2.5f, 3.99f, 0.0f));   // float -> uint truncates
    yu[1] = uint4(as_type<uint2>(float2(1.0f, -2.0f)), as_type<uint>(half2(1.0h, 2.0h)), uint(sizeof(float3)));
}

// Builtins of every shape: one record of 16 uints per thread.
kernel void shim_builtins(device uint* y [[buffer(0)]],
                          uint3 tpig [[thread_position_in_grid]], ushort2 tpitg [[thread_position_in_threadgroup]],
                          uint tiitg [[thread_index_in_threadgroup]], uint3 tgpig [[threadgroup_position_in_grid]],
                          uint3 tptg [[threads_per_threadgroup]], uint3 tgpg [[threadgroups_per_grid]],
                          uint3 tpg [[threads_per_grid]], uint lane [[thread_index_in_simdgroup]],
                          uint sg [[simdgroup_index_in_threadgroup]], uint tpsg [[threads_per_simdgroup]],
                          uint nsg [[simdgroups_per_threadgroup]], uint tew [[thread_execution_width]])
{
    const uint flat = (tpig.z * tpg.y + tpig.y) * tpg.x + tpig.x;
    device uint* r = y + flat * 16;
    r[0] = tpig.x; r[1] = tpig.y; r[2] = tpig.z; r[3] = tpitg.x; r[4] = tpitg.y; r[5] = tiitg; r[6] = tgpig.x;
    r[7] = tgpig.y; r[8] = tptg.x * 100 + tptg.y; r[9] = tgpg.x * 100 + tgpg.y; r[10] = tpg.x * 100 + tpg.y;
    r[11] = lane; r[12] = sg; r[13] = tpsg; r[14] = nsg; r[15] = tew;
}

// half arithmetic rounds to binary16 after every operation, as an Apple GPU computes it, not once at the end
// of an expression evaluated in float (clang's default excess precision for _Float16 on x86-64). Each
// expression's first operation rounds (a tie to even, or a carry below half's last bit) before the second
// uses it; none can be changed by reassociation or contraction, so the fast-math build must give the same.
// x = (1, 2^-11, 3, 2048, 1, 1 + 2^-10, 3).
kernel void shim_half_rounding(device const half* x [[buffer(0)]], device half* y [[buffer(1)]], uint i [[thread_position_in_grid]])
{
    if (i != 0) return;
    y[0] = (x[0] + x[1]) * x[2];  // 1 + 2^-11 ties to 1, times 3: 3 (excess precision: 3.001953125)
    y[1] = (x[3] + x[4]) * x[2];  // 2048 + 1 ties to 2048, times 3: 6144 (excess: 6147 -> 6148)
    y[2] = (x[5] * x[5]) * x[6];  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 rounds to 1 + 2^-9, times 3: 3.005859375 (excess: 3.0078125)
    const half2 v = half2(x[0], x[3]) + half2(x[1], x[4]);  // vectors round per lane: (1, 2048)
    y[3] = v.x * x[2];
    y[4] = v.y * x[2];
}

// SIMD-group functions, each on a full simdgroup and (where it makes sense) on a divergent half.
// Records of 24 per lane; x = lane-dependent values.
kernel void shim_simd(device const float* xf [[buffer(0)]], device float* yf [[buffer(1)]], device uint* yu [[buffer(2)]],
                      uint lane [[thread_index_in_simdgroup]], uint tid [[thread_index_in_threadgroup]])
{
    const float x = xf[tid];
    const uint u = uint(tid * 7 + 3);
    device float* f = yf + tid * 24;
    device uint* r = yu + tid * 24;
    f[0] = simd_sum(x); f[1] = simd_product(x); f[2] = simd_max(x); f[3] = simd_min(x);
    f[4] = simd_shuffle(x, ushort((lane * 5) % 32)); f[5] = simd_shuffle_xor(x, ushort(3));
    f[6] = simd_shuffle_down(x, ushort(4)); f[7] = simd_shuffle_up(x, ushort(4)); f[8] = simd_broadcast(x, ushort(7));
    f[9] = simd_prefix_inclusive_sum(x); f[10] = simd_prefix_exclusive_sum(x);
    f[11] = simd_prefix_inclusive_product(x); f[12] = simd_prefix_exclusive_product(x);
    r[0] = simd_and(u); r[1] = simd_or(u); r[2] = simd_xor(u); r[3] = simd_sum(u); r[4] = simd_max(u); r[5] = simd_min(u);
    r[6] = uint(ulong(simd_ballot(x > 0.0f))); r[7] = uint(simd_all(x > -100.0f)); r[8] = uint(simd_any(x > 1000.0f));
    r[9] = simd_broadcast_first(u + lane);
    if (lane < 16) {                        // divergent: only lanes 0..15 take part
        f[13] = simd_sum(x);
        f[14] = simd_shuffle_xor(x, ushort(1));
        r[10] = uint(ulong(simd_ballot(true)));
        r[11] = simd_broadcast_first(lane + 100);
        f[15] = simd_shuffle(x, ushort(20));  // lane 20 is not active: reads the poison pattern
    } else {
        f[13] = simd_max(x);
        f[14] = 0.0f; r[10] = 0; r[11] = 0; f[15] = 0.0f;
    }
    simdgroup_barrier(mem_flags::mem_none);
}

// simdgroup_matrix: load from device and threadgroup memory (origin and transposed), multiply,
// multiply_accumulate, store; A is 16x16, B is 16x16 (row-major, ld 16).
kernel void shim_matrix(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]], device float* C [[buffer(2)]],
                        device half* H [[buffer(3)]], uint tid [[thread_index_in_threadgroup]])
{
    threadgroup float tb[16 * 16];
    for (uint i = tid; i < 256; i += 32) tb[i] = B[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // C[0:8, 0:8] = A[0:8, 0:16] * B[0:16, 0:8] via two multiply_accumulates
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8>(0.0f);
    for (uint k = 0; k < 16; k += 8) {
        simdgroup_float8x8 a, b;
        simdgroup_load(a, A, 16, ulong2(k, 0));
        simdgroup_load(b, tb, 16, ulong2(0, k));
        simdgroup_multiply_accumulate(acc, a, b, acc);
    }
    simdgroup_store(acc, C, 16, ulong2(0, 0));
    // C[8:16, 8:16] = A[8:16, 8:16]^T (transposed load, pointer offset) * B[8:16, 8:16]
    simdgroup_float8x8 at, bb, p;
    simdgroup_load(at, A + 8 * 16 + 8, 16, ulong2(0, 0), true);
    simdgroup_load(bb, B, 16, ulong2(8, 8));
    simdgroup_multiply(p, at, bb);
    simdgroup_store(p, C, 16, ulong2(8, 8));
    // C[0:8, 8:16] = B[0:8, 0:8] stored transposed
    simdgroup_float8x8 t;
    simdgroup_load(t, tb, 16);
    simdgroup_store(t, C + 8, 16, ulong2(0, 0), true);
    // half matrix: filled 1.5 * 2.0 identity-like
    simdgroup_half8x8 h1 = make_filled_simdgroup_matrix<half, 8>(1.5h), h2 = make_filled_simdgroup_matrix<half, 8>(0.25h), h3;
    simdgroup_multiply(h3, h1, h2);
    simdgroup_store(h3, H, 8);
}

// Atomics on device and threadgroup memory (relaxed). out: [0] uint add, [1] int sub, [2] uint max, [3] uint min,
// [4] exchange count, [5] cas successes, [6] float add (bits), [7] threadgroup total, [8] or, [9] xor
kernel void shim_atomics(device atomic_uint* a [[buffer(0)]], device atomic_int* b [[buffer(1)]], device atomic_float* fsum [[buffer(2)]],
                         uint gid [[thread_position_in_grid]], uint tid [[thread_index_in_threadgroup]])
{
    threadgroup atomic_uint local;
    if (tid == 0) atomic_store_explicit(&local, 0u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    atomic_fetch_add_explicit(&local, gid + 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&a[0], gid, memory_order_relaxed);
    atomic_fetch_sub_explicit(&b[1], int(gid), memory_order_relaxed);
    atomic_fetch_max_explicit(&a[2], gid * 3u, memory_order_relaxed);
    atomic_fetch_min_explicit(&a[3], gid + 5u, memory_order_relaxed);
    uint old = atomic_exchange_explicit(&a[4], gid, memory_order_relaxed);
    (void)old;
    uint expected = 0;
    if (atomic_compare_exchange_weak_explicit(&a[5], &expected, 1u, memory_order_relaxed, memory_order_relaxed)) atomic_fetch_add_explicit(&a[6], 1u, memory_order_relaxed);
    atomic_fetch_add_explicit(fsum, 0.5f, memory_order_relaxed);
    atomic_fetch_or_explicit(&a[8], 1u << (gid % 32), memory_order_relaxed);
    atomic_fetch_xor_explicit(&a[9], gid, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) atomic_fetch_add_explicit(&a[7], atomic_load_explicit(&local, memory_order_relaxed), memory_order_relaxed);
}

// Threadgroup memory from the host: [[threadgroup(i)]] lengths, two of them, plus a declared scalar.
kernel void shim_tgmem(device float* y [[buffer(0)]], threadgroup float* t0 [[threadgroup(0)]], threadgroup uint* t1 [[threadgroup(1)]],
                       uint tid [[thread_index_in_threadgroup]], uint n [[threads_per_threadgroup]])
{
    threadgroup float total;
    t0[tid] = float(tid);
    t1[tid] = tid * 2;
    if (tid == 0) total = 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) { for (uint i = 0; i < n; i++) total += t0[i] + float(t1[i]); }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[tid] = total;
}
