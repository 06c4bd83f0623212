// What a Gemma 4 encode takes in, checked and prepared on the host before its first stage
// (docs/models/gemma4-vision.md): the rows split into images with their padding dropped and each
// image's positions checked to form a whole patch grid, then the tables the tower reads (the kept
// pixel rows, the position-table taps, the rope angles, the pooling taps). The tower
// (tower.cc) runs the stages.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/vision_model.h"

namespace tessera::gemma4 {

// The tower's dimensions, from the TowerSpec (tower.cc reads them).
struct Dims {
  int64_t hidden, heads, head_dim, qdim, inter, out, patch, patch_dim, pool, pos_rows;
  float eps;
  double theta;
  bool chw, standardize;
};

// One image after validation: its real rows (padding dropped) and its patch grid.
struct Image {
  int64_t begin = 0, rows = 0;   // in the compacted row order
  int64_t wp = 0, hp = 0;        // patch grid
  int64_t pooled_begin = 0;      // first pooled token
};

// The images of `in`, and in `keep` the rows they keep (padding dropped), in order; a malformed
// input is ERR_INVALID_ARGUMENT naming the image and the row.
std::vector<Image> validate(const Dims& d, const PixelInput& in, std::vector<int64_t>& keep);

// Where upload_inputs writes: regions of the scratch (byte offsets), gather_sum's two buffers, and
// the pooled rows of the whole input.
struct InputRegions {
  backend::Buffer* scratch;
  uint64_t pixels, cos, sin;
  backend::Buffer* pos_lookup;
  backend::Buffer* pool_lookup;
  int64_t pooled_rows;
};

void upload_inputs(backend::Backend& backend, const Dims& d, const PixelInput& in, const std::vector<int64_t>& keep,
                   const std::vector<Image>& images, const InputRegions& to);

}  // namespace tessera::gemma4
