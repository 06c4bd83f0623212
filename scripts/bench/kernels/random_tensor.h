// The kernel benchmarks' inputs: a tensor of normally distributed values in the given dtype,
// uploaded to a backend (the same seed gives the same values on every backend).
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "gpu/backend.h"

inline tessera::gpu::Tensor random_tensor(tessera::gpu::Backend& b, int64_t rows, int64_t cols, tessera::DType dt,
                                          float scale, uint32_t seed) {
  using tessera::DType;
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  size_t n = size_t(rows * cols), es = tessera::dtype_size(dt);
  std::vector<char> host(n * es);
  for (size_t i = 0; i < n; ++i) {
    float v = d(g);
    if (dt == DType::F32) std::memcpy(&host[i * 4], &v, 4);
    else {
      uint16_t h = dt == DType::BF16 ? tessera::f32_to_bf16(v) : tessera::f32_to_f16(v);
      std::memcpy(&host[i * 2], &h, 2);
    }
  }
  tessera::gpu::Buffer* buf = b.alloc(host.size());
  b.upload(buf, 0, host.data(), host.size());
  return tessera::gpu::make_tensor(buf, 0, dt, rows, cols);
}
