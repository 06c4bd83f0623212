// The per-ISA kernel table: one instance per Simd level, chosen when the backend is made. The
// drivers (gemm.cc, attention.cc, ...) do blocking, packing and threading once; only these inner
// loops differ between AVX-512, AVX2+FMA, NEON and scalar.
#pragma once
#include <cstdint>

#include "common/dtype.h"
#include "cpu/cpu_backend.h"

namespace tessera::cpu {

struct Kernels {
  Simd level;
  // GEMM micro-kernel: C[0..mr)[0..nr) (row stride ldc) = (accumulate ? C : 0) + A·B, where A is
  // packed k-major [kc][mr] and B k-major [kc][nr].
  int mr, nr;
  void (*gemm_micro)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate);
  // Packs B = Wᵀ for columns [0, n) (n <= nr; the rest zero) over kc: dst[k*nr + j] = W[j][k]
  // widened to f32; W rows start at w with a stride of ldw elements of type dt.
  void (*pack_b)(float* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc, int nr);
};

const Kernels& kernels_for(Simd level);

// Per-ISA tables (defined in kernels_<isa>.cc; each returns null where not compiled in).
const Kernels* scalar_kernels();
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();
const Kernels* neon_kernels();

// Scalar building blocks shared by the tables.
void pack_b_generic(float* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc, int nr);

}  // namespace tessera::cpu
