// Argument structs passed with setBytes, shared by the host (native/metal ops) and the MSL kernels
// (metal/*.metal). Only 4-byte fields, so the layout is the same in C++ and MSL; the host checks each
// size against what the kernel's `constant T&` parameter expects (tools/mslemu/prepass.mjs manifest).
#pragma once
#ifdef __METAL_VERSION__
#include <metal_stdlib>
#define KARGS_U32 uint
#define KARGS_CONST constant constexpr
#else
#include <cstdint>
#define KARGS_U32 uint32_t
#define KARGS_CONST constexpr
#endif

namespace kargs {

typedef KARGS_U32 u32;

// The kernels' tile shapes: the kernels are written for them and the op layer (native/metal/ops) sizes grids
// and threadgroup memory from them (docs/metal.md#kernels).
// GEMM (matmul.metal): a threadgroup of 2 x 2 simdgroups computes kGemmBM rows x kGemmBN outputs (each
// simdgroup 32 x 32 as 4 x 4 simdgroup_float8x8), K in steps of kGemmBK, two stages in threadgroup memory.
KARGS_CONST u32 kGemmBM = 64, kGemmBN = 64, kGemmBK = 16, kGemmThreads = 128;
KARGS_CONST u32 kMatvecMaxRows = 4;  // at most this many rows: the GEMV path (one accumulator per row per lane)
// Attention (attention.metal): kAttnBQ query rows per threadgroup (4 simdgroups x 8 rows), keys in tiles of
// kAttnBK (kAttnBKSmall when three tiles of head_dim would not fit in threadgroup memory); the flash kernels
// take head_dim a multiple of 8 up to kAttnMaxHeadDim, any other head_dim runs the row kernel (4 rows per group).
KARGS_CONST u32 kAttnBQ = 32, kAttnBK = 32, kAttnBKSmall = 16, kAttnMaxHeadDim = 128, kAttnThreads = 128;
KARGS_CONST u32 kAttnRowsPerGroup = 4;
// The flash kernels' [[threadgroup(0)]]: K tile [kb][hd], V tile [kb][hd], scratch [kAttnBQ][width] (the query
// block, then per simdgroup its S/P rows with the 8 x 8 correction diagonal beside them, then its output rows).
inline u32 attn_scratch_width(u32 hd, u32 kb) { return hd > kb + 8 ? hd : kb + 8; }
inline u32 attn_flash_tg_floats(u32 hd, u32 kb) { return 2 * kb * hd + kAttnBQ * attn_scratch_width(hd, kb); }
// The same in bytes, with K and V tiles of tile_bytes per element (4, or 2 for the half tiles of precision 'f16').
inline u32 attn_flash_tg_bytes(u32 hd, u32 kb, u32 tile_bytes) { return 2 * kb * hd * tile_bytes + kAttnBQ * attn_scratch_width(hd, kb) * 4; }
// The row kernel's: K and V tiles, 4 scaled query rows, 4 rows of probabilities.
inline u32 attn_rows_tg_floats(u32 hd, u32 kb) { return 2 * kb * hd + kAttnRowsPerGroup * (hd + kb); }

// Stored element types of weights (the order of tessera::DType).
enum WeightType { kF32 = 0, kF16 = 1, kBF16 = 2 };
// Activations of the linear's epilogue (Linear::act).
enum Activation { kCopy = 0, kGeluTanh = 1, kGeluErf = 2, kQuickGelu = 3, kSilu = 4 };

// All matrices are row-major with a row stride `ld` in elements; pointers are bound at the tensor's start.
struct Binary {
  u32 rows, cols, lda, ldb, ldy;
  u32 pad0, pad1, pad2;
};
// y = ((x - shift - sub[c]) * mul[c]) * scale; sub/mul optional (has_*), any weight type.
struct Affine {
  u32 rows, cols, ldx, ldy;
  u32 has_sub, sub_type, has_mul, mul_type;
  float scale, shift;
  u32 pad0, pad1;
};
// y = act(clamp(clamp(x, in) · Wᵀ + bias, out)) · mul + residual; W is [out, in] of type `w` (kernel variant).
// The clamps apply only where has_in_clamp / has_out_clamp: "no clamp" is not an infinite bound, since the
// kernels run under fast math (metal/kernel_common.h); a bound given as infinite beside a finite one is ±FLT_MAX.
struct Linear {
  u32 rows, in, out, ldx, ldy, ldr;
  u32 act, has_bias, bias_type, has_residual;
  float in_min, in_max, out_min, out_max;
  u32 has_mul, ldm;
  u32 has_in_clamp, has_out_clamp;
};
// LayerNorm (weight + bias) or RMSNorm over each `group` consecutive columns (group == cols: the row); RMSNorm
// then adds the residual (has_residual: f32, row stride ldr).
struct Norm {
  u32 rows, cols, ldx, ldy, group;
  u32 has_weight, weight_type, has_bias, bias_type;
  float eps;
  u32 has_residual, ldr;
};
// Rotary embedding in place: x [rows, heads*head_dim], cos/sin f32 [rows, head_dim]; rope_norm RMS-norms each
// head first (eps, an optional weight of any type).
struct Rope {
  u32 rows, heads, head_dim, sections, ldx, ldc;
  u32 has_weight, weight_type;
  float eps;
  u32 pad0, pad1, pad2;
};
// One attention segment: q/k/v/out bound at the segment's first row; scores scaled by `scale`.
struct Attention {
  u32 n, heads, head_dim, ldq, ldk, ldv, ldo;  // n: keys
  u32 kblock;  // keys per threadgroup-memory tile (16 or 32)
  float scale;
  u32 nq;  // query rows (n, or a chunk of queries against all n keys)
  u32 pad1, pad2;
};
// count_nonfinite over x [rows, cols] with row stride ldx.
struct Finite {
  u32 rows, cols, ldx, pad0;
};
// y[r, c] (+)= Σ_t w[r, t] · table[idx[r, t], c]; idx < 0 contributes nothing.
struct Gather {
  u32 rows, cols, ldy, ldt, taps, table_type, accumulate, table_rows;
};

}  // namespace kargs
