// Portable kernels: plain C++ the compiler vectorises for the baseline ISA. The fallback on
// machines without AVX2 or NEON, and the reference the SIMD paths are compared with.
#include <cstring>

#include "cpu/kernels.h"

namespace tessera::cpu {

namespace {

constexpr int kMr = 4, kNr = 16;

void gemm_micro_scalar(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, bool accumulate) {
  float acc[kMr][kNr];
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j) acc[i][j] = accumulate ? c[i * ldc + j] : 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    const float* bk = b + k * kNr;
    for (int i = 0; i < kMr; ++i) {
      float ai = a[k * kMr + i];
      for (int j = 0; j < kNr; ++j) acc[i][j] += ai * bk[j];
    }
  }
  for (int i = 0; i < kMr; ++i)
    for (int j = 0; j < kNr; ++j) c[i * ldc + j] = acc[i][j];
}

}  // namespace

void pack_b_generic(float* dst, const void* w, DType dt, int64_t ldw, int64_t n, int64_t kc, int nr) {
  const size_t es = dtype_size(dt);
  for (int64_t j = 0; j < n; ++j) {
    const char* src = static_cast<const char*>(w) + size_t(j) * size_t(ldw) * es;
    switch (dt) {
      case DType::F32: {
        const float* s = reinterpret_cast<const float*>(src);
        for (int64_t k = 0; k < kc; ++k) dst[k * nr + j] = s[k];
        break;
      }
      case DType::BF16: {
        const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
        for (int64_t k = 0; k < kc; ++k) dst[k * nr + j] = bf16_to_f32(s[k]);
        break;
      }
      case DType::F16: {
        const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
        for (int64_t k = 0; k < kc; ++k) dst[k * nr + j] = f16_to_f32(s[k]);
        break;
      }
    }
  }
  for (int64_t j = n; j < nr; ++j)
    for (int64_t k = 0; k < kc; ++k) dst[k * nr + j] = 0.0f;
}

const Kernels* scalar_kernels() {
  static const Kernels k{Simd::Scalar, kMr, kNr, gemm_micro_scalar, pack_b_generic};
  return &k;
}

}  // namespace tessera::cpu
