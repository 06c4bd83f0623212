// The inverse frequencies of both towers' 2D rope (docs/models/qwen-vision.md#rope,
// docs/models/gemma4-vision.md#rope): each axis turns head_dim / 2 lanes as head_dim / 4 rotating
// pairs, inv[j] = f32(1 / f32(theta ^ f32(2j / (head_dim / 2)))), j < head_dim / 4, in f32 as HF
// computes them. Each tower lays the angles out in its own order.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace tessera {

inline std::vector<float> rope_inverse_frequencies(double theta, int64_t head_dim) {
  std::vector<float> inv(size_t(head_dim / 4));
  for (int64_t j = 0; j < head_dim / 4; ++j)
    inv[size_t(j)] = float(1.0f / float(std::pow(float(theta), float(float(2 * j) / float(head_dim / 2)))));
  return inv;
}

}  // namespace tessera
