// y = act(clamp(clamp(x, in_min, in_max) · Wᵀ + bias, out_min, out_max)) + residual
// x f32 [rows, in]; W [out, in] read directly in its stored type (f32, f16, bf16 widened by a shift);
// accumulation in f32. Two paths, each with a kernel per weight type:
//   matmul_{f32,f16,bf16}      tiles of 32 rows x 32 outputs per threadgroup of 128 threads (4 simdgroups,
//                              each 16 x 16 as 2 x 2 simdgroup_float8x8 accumulators), K in steps of 32
//                              staged in threadgroup memory (zero-filled past the edges: any size works)
//   matvec_{f32,f16,bf16}      few rows (<= 4): one simdgroup per output column, lanes stride over K
// residual may alias y: each output element is read and written by the same thread.
#include "kernel_common.h"

constant constexpr uint TILE = 32;

inline float epilogue(float acc, uint r, uint c, constant kargs::Linear& p, device const uchar* bias, device const float* res) {
    float v = acc;
    if (p.has_bias != 0) v = v + load_any(bias, p.bias_type, c);
    v = min(max(v, p.out_min), p.out_max);
    v = activate(p.act, v);
    if (p.has_residual != 0) v = v + res[r * p.ldr + c];
    return v;
}

template <typename W>
inline void matmul_tile(device const float* x, device const W* w, device const uchar* bias, device const float* res, device float* y,
                        constant kargs::Linear& p, uint2 tg, uint tid, uint sg,
                        threadgroup float* xs, threadgroup float* ws, threadgroup float* cs)
{
    const uint row0 = tg.y * TILE, col0 = tg.x * TILE;
    const uint sr = (sg / 2) * 16, sc = (sg % 2) * 16;      // this simdgroup's 16 x 16 corner
    simdgroup_float8x8 acc[2][2];
    for (uint i = 0; i < 2; i++)
        for (uint j = 0; j < 2; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8>(0.0f);
    for (uint k0 = 0; k0 < p.in; k0 += TILE) {
        // xs[r][k] = clamp(x[row0 + r][k0 + k]); ws[k][n] = W[col0 + n][k0 + k] (stored as B = Wᵀ)
        for (uint i = tid; i < TILE * TILE; i += 128) {
            const uint r = i / TILE, k = i % TILE;
            const uint gr = row0 + r, gk = k0 + k;
            xs[i] = (gr < p.rows && gk < p.in) ? min(max(x[gr * p.ldx + gk], p.in_min), p.in_max) : 0.0f;
            const uint gn = col0 + r;  // here r indexes output features
            ws[k * TILE + r] = (gn < p.out && gk < p.in) ? widen(w, gn * p.in + gk) : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < TILE; kk += 8) {
            simdgroup_float8x8 a[2], b[2];
            for (uint i = 0; i < 2; i++) simdgroup_load(a[i], xs, TILE, ulong2(kk, sr + 8 * i));
            for (uint j = 0; j < 2; j++) simdgroup_load(b[j], ws, TILE, ulong2(sc + 8 * j, kk));
            for (uint i = 0; i < 2; i++)
                for (uint j = 0; j < 2; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);    // xs/ws are overwritten by the next step
    }
    for (uint i = 0; i < 2; i++)
        for (uint j = 0; j < 2; j++) simdgroup_store(acc[i][j], cs, TILE, ulong2(sc + 8 * j, sr + 8 * i));
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < TILE * TILE; i += 128) {
        const uint r = row0 + i / TILE, c = col0 + i % TILE;
        if (r < p.rows && c < p.out) y[r * p.ldy + c] = epilogue(cs[i], r, c, p, bias, res);
    }
}

template <typename W>
inline void matvec_cols(device const float* x, device const W* w, device const uchar* bias, device const float* res, device float* y,
                        constant kargs::Linear& p, uint col, uint lane)
{
    if (col >= p.out) return;                 // uniform per simdgroup
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (uint k = lane; k < p.in; k += 32) {
        const float wk = widen(w, col * p.in + k);
        for (uint r = 0; r < p.rows; r++) acc[r] += min(max(x[r * p.ldx + k], p.in_min), p.in_max) * wk;
    }
    for (uint r = 0; r < p.rows; r++) {
        const float s = simd_sum(acc[r]);
        if (lane == 0) y[r * p.ldy + col] = epilogue(s, r, col, p, bias, res);
    }
}

// One kernel per weight type: plain kernel declarations (no macros, no template kernels).
kernel void matmul_f32(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float xs[TILE * TILE];
    threadgroup float ws[TILE * TILE];
    threadgroup float cs[TILE * TILE];
    matmul_tile(x, w, bias, res, y, p, tg, tid, sg, xs, ws, cs);
}
kernel void matmul_f16(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float xs[TILE * TILE];
    threadgroup float ws[TILE * TILE];
    threadgroup float cs[TILE * TILE];
    matmul_tile(x, w, bias, res, y, p, tg, tid, sg, xs, ws, cs);
}
kernel void matmul_bf16(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       uint2 tg [[threadgroup_position_in_grid]], uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]])
{
    threadgroup float xs[TILE * TILE];
    threadgroup float ws[TILE * TILE];
    threadgroup float cs[TILE * TILE];
    matmul_tile(x, w, bias, res, y, p, tg, tid, sg, xs, ws, cs);
}
kernel void matvec_f32(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, bias, res, y, p, tg * nsg + sg, lane);
}
kernel void matvec_f16(device const float* x [[buffer(0)]], device const half* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, bias, res, y, p, tg * nsg + sg, lane);
}
kernel void matvec_bf16(device const float* x [[buffer(0)]], device const ushort* w [[buffer(1)]], device const uchar* bias [[buffer(2)]],
                       device const float* res [[buffer(3)]], device float* y [[buffer(4)]], constant kargs::Linear& p [[buffer(5)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]], uint nsg [[simdgroups_per_threadgroup]])
{
    matvec_cols(x, w, bias, res, y, p, tg * nsg + sg, lane);
}
