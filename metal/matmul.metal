// y = act(clamp(clamp(x, in_min, in_max) · Wᵀ + bias, out_min, out_max)) · mul + residual
// x f32 [rows, in]; W [out, in] read in its stored type (f32, f16, bf16 widened by a shift), accumulation in f32.
// Two paths, each with a kernel per weight type (docs/metal.md#kernels):
//   matmul_{f32,f16,bf16}   a threadgroup of 2 x 2 simdgroups computes kGemmBM rows x kGemmBN outputs, each
//                           simdgroup 32 x 32 as 4 x 4 simdgroup_float8x8 accumulators. K advances kGemmBK at a
//                           time through two threadgroup stages: while the simdgroups multiply one stage, the
//                           threads load the next (one barrier per step). Each element is loaded once per tile
//                           in its stored type, clamped (x) or widened (W) as it is staged. A tile wholly inside
//                           the matrices with in % kGemmBK == 0 takes the path without bounds checks; edge tiles
//                           check every element and zero-fill. The epilogue goes through threadgroup memory so
//                           that consecutive threads write consecutive outputs.
//   matvec_{f32,f16,bf16}   few rows (<= kMatvecMaxRows): one simdgroup per output column, lanes stride over K
// mul and residual may alias y: each output element is read and written by the same thread.
// Precision 'f16' (docs/metal.md#half-precision): the _h kernels read x as half, the _fh kernels as float (the
// patch embedding's pixels), and both write y and read mul and residual as half; the _hf kernels read x as half
// and write y (and read mul and residual) as float, for an output a tower keeps f32 (backend::ActRange::Precise:
// Gemma 4's q, k and v). In all three x and W are staged in threadgroup memory as half (x clamped in float
// first, W widened from its stored type and rounded to half, as HF's fp16 holds its weights) and multiplied on
// simdgroup_half8x8 into float accumulators; the epilogue runs in float and rounds once as it stores y.
#include "kernel_common.h"

constant constexpr uint BM = kargs::kGemmBM, BN = kargs::kGemmBN, BK = kargs::kGemmBK, NT = kargs::kGemmThreads;
constant constexpr uint STAGE = (BM + BN) * BK;  // elements of one stage: xs [BM][BK], then ws [BN][BK]
// The staging layout below: every thread moves 8 consecutive k of one row of x and one row of W.
static_assert(BM == BN && BM * BK == 8 * NT && BM == 2 * 32, "matmul staging assumes 64 x 64 tiles, K steps of 16, 128 threads");
static_assert(BM * BN <= 2 * STAGE, "the epilogue tile reuses both stages");

// The operands of the fused epilogue, in the order of gpu::LinearArgs (metal/shared/args.h Linear).
// A: the activations' stored type (mul, residual, y): float, or half in precision 'f16'.
template <typename A>
struct Tail {
    device const uchar* bias;
    device const A* mul;
    device const A* res;
};

template <typename A>
inline float epilogue(float acc, uint r, uint c, constant kargs::Linear& p, Tail<A> t) {
    float v = acc;
    if (p.has_bias != 0) v = v + load_any(t.bias, p.bias_type, c);
    if (p.has_out_clamp != 0) v = min(max(v, p.out_min), p.out_max);
    v = activate(p.act, v);
    if (p.has_mul != 0) v = v * float(t.mul[r * p.ldm + c]);
    if (p.has_residual != 0) v = v + float(t.res[r * p.ldr + c]);
    return v;
}

// One K step into `st`: xs[r][k] = clamp(x[row0 + r][k0 + k]), ws[n][k] = W[col0 + n][k0 + k] widened, both
// in the tile type T (float, or half in precision 'f16').
template <bool kChecked, typename T, typename X, typename W>
inline void stage(device const X* x, device const W* w, constant kargs::Linear& p, uint row0, uint col0, uint k0, uint tid,
                  threadgroup T* st) {
    const uint r = tid / 2, kq = (tid % 2) * 8;
    threadgroup T* xs = st + r * BK + kq;
    threadgroup T* ws = st + BM * BK + r * BK + kq;
    const uint gr = row0 + r, gn = col0 + r, gk = k0 + kq;
    if (!kChecked) {
        device const X* xr = x + gr * p.ldx + gk;
        device const W* wr = w + gn * p.in + gk;
        for (uint i = 0; i < 8; i++) {
            const float xv = float(xr[i]);
            xs[i] = T(p.has_in_clamp != 0 ? min(max(xv, p.in_min), p.in_max) : xv);
            ws[i] = T(widen(wr, i));
        }
    } else {
        for (uint i = 0; i < 8; i++) {
            const bool kin = gk + i < p.in;
            const float xv = (gr < p.rows && kin) ? float(x[gr * p.ldx + gk + i]) : 0.0f;
            xs[i] = T(p.has_in_clamp != 0 ? min(max(xv, p.in_min), p.in_max) : xv);
            ws[i] = T((gn < p.out && kin) ? widen(w, gn * p.in + gk + i) : 0.0f);
        }
    }
}

// acc += xs · wsᵀ over one stage, for this simdgroup's 32 x 32 corner (sr, sc).
template <typename T>
inline void multiply_stage(threadgroup const T* st, uint sr, uint sc, thread simdgroup_float8x8 (&acc)[4][4]) {
    threadgroup const T* xs = st;
    threadgroup const T* ws = st + BM * BK;
    for (uint kk = 0; kk < BK; kk += 8) {
        simdgroup_matrix<T, 8, 8> a[4], b[4];
        for (uint i = 0; i < 4; i++) simdgroup_load(a[i], xs, BK, ulong2(kk, sr + 8 * i));
        // b[j][k][n] = W[sc + 8j + n][kk + k]: ws rows are W rows, so a transposed load
        for (uint j = 0; j < 4; j++) simdgroup_load(b[j], ws + (sc + 8 * j) * BK + kk, BK, ulong2(0, 0), true);
        for (uint i = 0; i < 4; i++)
            for (uint j = 0; j < 4; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
    }
}

template <bool kChecked, typename T, typename X, typename W, typename A>
inline void matmul_tile(device const X* x, device const W* w, Tail<A> tail, device A* y,
                        constant kargs::Linear& p, uint row0, uint col0, uint tid, uint sg, threadgroup float* smem) {
    threadgroup T* st = reinterpret_cast<threadgroup T*>(smem);  // the stages, in the tile type
    const uint sr = (sg / 2) * 32, sc = (sg % 2) * 32;  // this simdgroup's 32 x 32 corner
    simdgroup_float8x8 acc[4][4];
    for (uint i = 0; i < 4; i++)
        for (uint j = 0; j < 4; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    const uint steps = (p.in + BK - 1) / BK;
    stage<kChecked>(x, w, p, row0, col0, 0, tid, st);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint t = 0; t < steps; t++) {
        // stage t + 1 goes where step t - 1 was read: the barrier that ended step t - 1 released it
        if (t + 1 < steps) stage<kChecked>(x, w, p, row0, col0, (t + 1) * BK, tid, st + ((t + 1) & 1) * STAGE);
        multiply_stage(st + (t & 1) * STAGE, sr, sc, acc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    threadgroup float* cs = smem;  // [BM][BN], over both stages: every simdgroup is past its last multiply
    for (uint i = 0; i < 4; i++)
        for (uint j = 0; j < 4; j++) simdgroup_store(acc[i][j], cs, BN, ulong2(sc + 8 * j, sr + 8 * i));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < BM * BN; i += NT) {
        const uint r = row0 + i / BN, c = col0 + i % BN;
        if (!kChecked || (r < p.rows && c < p.out)) y[r * p.ldy + c] = A(epilogue(cs[i], r, c, p, tail));
    }
}

// T: the tile type (float; half for the half kernels, whose stages take half the bytes of the same buffer).
template <typename T, typename X, typename W, typename A>
inline void matmul_group(device const X* x, device const W* w, Tail<A> tail, device A* y,
                         constant kargs::Linear& p, uint2 tg, uint tid, uint sg, threadgroup float* smem) {
    const uint row0 = tg.y * BM, col0 = tg.x * BN;
    const bool inside = row0 + BM <= p.rows && col0 + BN <= p.out && p.in % BK == 0;  // uniform over the group
    if (inside) matmul_tile<false, T>(x, w, tail, y, p, row0, col0, tid, sg, smem);
    else matmul_tile<true, T>(x, w, tail, y, p, row0, col0, tid, sg, smem);
}

template <typename X, typename W, typename A>
inline void matvec_cols(device const X* x, device const W* w, Tail<A> tail, device A* y,
                        constant kargs::Linear& p, uint col, uint lane)
{
    if (col >= p.out) return;                 // uniform per simdgroup
    float acc[kargs::kMatvecMaxRows];
    for (uint r = 0; r < kargs::kMatvecMaxRows; r++) acc[r] = 0.0f;
    for (uint k = lane; k < p.in; k += 32) {
        const float wk = widen(w, col * p.in + k);
        for (uint r = 0; r < p.rows; r++) {
            const float xv = float(x[r * p.ldx + k]);
            acc[r] += (p.has_in_clamp != 0 ? min(max(xv, p.in_min), p.in_max) : xv) * wk;
        }
    }
    for (uint r = 0; r < p.rows; r++) {
        const float s = simd_sum(acc[r]);
        if (lane == 0) y[r * p.ldy + col] = A(epilogue(s, r, col, p, tail));
    }
}

// One kernel per weight type: plain kernel declarations (no macros, no template kernels).
kernel void matmul_f32(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<float>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<float>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<float>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matvec_f32(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
// Precision 'f16': _h reads x as half, _fh as float; y, mul and residual are half.
kernel void matmul_f32_h(device const half* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<half>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16_h(device const half* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<half>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16_h(device const half* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<half>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f32_fh(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<half>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16_fh(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<half>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16_fh(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<half>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matvec_f32_h(device const half* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<half>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16_h(device const half* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<half>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16_h(device const half* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<half>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f32_fh(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<half>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16_fh(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<half>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16_fh(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const half* res [[buffer(3)]], device half* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const half* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<half>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
// x half, y, mul and residual float (the _hf kernels: an output kept f32 in precision 'f16').
kernel void matmul_f32_hf(device const half* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16_hf(device const half* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16_hf(device const half* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<half>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matvec_f32_hf(device const half* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16_hf(device const half* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16_hf(device const half* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
// Precision 'bf16' (MSL 3.1): the half kernels' design with bfloat storage: _b, _fb and _bf as _h, _fh and _hf,
// x and W staged as bfloat (W rounded to bfloat, as HF's bf16 holds its weights) on simdgroup_bfloat8x8.
#if defined(__HAVE_BFLOAT__)
kernel void matmul_f32_b(device const bfloat* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16_b(device const bfloat* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16_b(device const bfloat* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f32_fb(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16_fb(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16_fb(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matvec_f32_b(device const bfloat* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16_b(device const bfloat* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16_b(device const bfloat* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f32_fb(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16_fb(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16_fb(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const bfloat* res [[buffer(3)]], device bfloat* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const bfloat* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<bfloat>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matmul_f32_bf(device const bfloat* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_f16_bf(device const bfloat* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matmul_bf16_bf(device const bfloat* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float smem[2 * STAGE];
    matmul_group<bfloat>(x, w, Tail<float>{bias, mul, res}, y, p, tg, tid, sg, smem);
}
kernel void matvec_f32_bf(device const bfloat* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16_bf(device const bfloat* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16_bf(device const bfloat* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       device const float* mul [[buffer(6)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, Tail<float>{bias, mul, res}, y, p, tg * nsg + sg, lane);
}
#endif  // __HAVE_BFLOAT__
