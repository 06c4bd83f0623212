// The kernel benchmarks' inputs: their row counts from the command line, and tensors of normally
// distributed values (the same seed gives the same values on every backend).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "backend/backend.h"

// "256,1120" -> {256, 1120} (the --rows option).
inline std::vector<int64_t> int_list(const std::string& v) {
  std::vector<int64_t> out;
  for (size_t p = 0; p < v.size();) {
    const size_t q = v.find(',', p);
    out.push_back(std::atoll(v.substr(p, q - p).c_str()));
    p = q == std::string::npos ? v.size() : q + 1;
  }
  return out;
}

// rows x cols values drawn from N(0, scale), in dtype dt, uploaded to b.
inline tessera::backend::Tensor random_tensor(tessera::backend::Backend& b, int64_t rows, int64_t cols, tessera::DType dt,
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
  tessera::backend::Buffer* buf = b.alloc(host.size());
  b.upload(buf, 0, host.data(), host.size());
  return tessera::backend::make_tensor(buf, 0, dt, rows, cols);
}
