// Argument structs passed with setBytes, shared by the host (native/metal ops) and the MSL kernels
// (metal/*.metal). Only 4-byte fields, so the layout is the same in C++ and MSL; the host checks each
// size against what the kernel's `constant T&` parameter expects (tools/mslemu/prepass.mjs manifest).
#pragma once
#ifdef __METAL_VERSION__
#include <metal_stdlib>
#define KARGS_U32 uint
#else
#include <cstdint>
#define KARGS_U32 uint32_t
#endif

namespace kargs {

typedef KARGS_U32 u32;

// Stored element types of weights (the order of tessera::DType).
enum WeightType { kF32 = 0, kF16 = 1, kBF16 = 2 };
// Activations of the linear's epilogue (Linear::act).
enum Activation { kCopy = 0, kGeluTanh = 1, kGeluErf = 2 };
// Element-wise operations of ew_binary.
enum BinaryOp { kAdd = 0, kMul = 1 };

// All matrices are row-major with a row stride `ld` in elements; pointers are bound at the tensor's start.
struct Binary {
  u32 rows, cols, lda, ldb, ldy;
  u32 op;
  u32 pad0, pad1;
};
// y = ((x - shift - sub[c]) * mul[c]) * scale; sub/mul optional (has_*), any weight type.
struct Affine {
  u32 rows, cols, ldx, ldy;
  u32 has_sub, sub_type, has_mul, mul_type;
  float scale, shift;
  u32 pad0, pad1;
};
// y = act(clamp(clamp(x, in) · Wᵀ + bias, out)) + residual; W is [out, in] of type `w` (kernel variant).
struct Linear {
  u32 rows, in, out, ldx, ldy, ldr;
  u32 act, has_bias, bias_type, has_residual;
  float in_min, in_max, out_min, out_max;
  u32 pad0, pad1;
};
// LayerNorm (weight + bias) or RMSNorm over each `group` consecutive columns (group == cols: the row).
struct Norm {
  u32 rows, cols, ldx, ldy, group;
  u32 has_weight, weight_type, has_bias, bias_type;
  float eps;
  u32 pad0, pad1;
};
// Rotary embedding in place: x [rows, heads*head_dim], cos/sin f32 [rows, head_dim].
struct Rope {
  u32 rows, heads, head_dim, sections, ldx, ldc;
  u32 pad0, pad1;
};
// One attention segment: q/k/v/out bound at the segment's first row; scores scaled by `scale`.
struct Attention {
  u32 n, heads, head_dim, ldq, ldk, ldv, ldo;  // n: keys
  u32 kblock;  // keys per threadgroup-memory tile (16 or 32)
  float scale;
  u32 nq;  // query rows (n, or a chunk of queries against all n keys)
  u32 pad1, pad2;
};
// y[r, c] (+)= Σ_t w[r, t] · table[idx[r, t], c]; idx < 0 contributes nothing.
struct Gather {
  u32 rows, cols, ldy, ldt, taps, table_type, accumulate, table_rows;
};

}  // namespace kargs
