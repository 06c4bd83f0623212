// What a Qwen3.5 / Qwen3-VL encode takes in, checked and prepared on the host before its first stage
// (docs/models/qwen-vision.md): the pixel rows against their grids, and the per-token tables the
// tower reads (bilinear taps into the position table, the 2D rope angles). The tower
// (qwen_vision.cc) runs the stages.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "models/vision_model.h"

namespace tessera::qwen {

// The tower's dimensions, from the TowerSpec (qwen_vision.cc reads them).
struct Dims {
  int64_t hidden, heads, head_dim, inter, out, patch_dim, merge, side;
  float eps;
  double theta;
  backend::Act mlp_act;  // hidden_act: tanh GELU on every real checkpoint
};

// Refuses rows whose width is not the tower's patch row, and grids that are empty, not whole merge
// windows, or that do not add up to the rows (ERR_INVALID_ARGUMENT naming which).
void validate(const Dims& d, const PixelInput& in);

// Where upload_positions writes: the rope tables' regions of the scratch, and gather_sum's buffer.
struct PositionRegions {
  backend::Buffer* scratch;
  uint64_t cos, sin;  // byte offsets in scratch
  backend::Buffer* lookup;
};

// The per-token position taps and rope tables of `in`, uploaded to `to`.
void upload_positions(backend::Backend& backend, const Dims& d, const PixelInput& in, const PositionRegions& to);

}  // namespace tessera::qwen
