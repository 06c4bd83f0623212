// The inputs of a tower fed by Qwen's image processor (docs/models/qwen-vision.md): patch rows of
// one or more images, each a (t, h, w) grid of patches whose rows come in merge-window order
// (#token-order). What the Qwen towers share about them: checking rows against grids, the attention
// segments of whole frames, and the 2D rope tables.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/vision_model.h"

namespace tessera::vit {

// Rows of the width the tower expects, grids that are whole merge windows and add up to the rows.
// TypeScript checks the same before calling (ERR_INVALID_ARGUMENT there); here a mismatch is still
// named, as ERR_INVALID_ARGUMENT, for the addon's other callers.
void check_grids(const PixelInput& in, int64_t patch_width, int64_t merge);

// One attention segment per frame: the rows of a frame attend to each other only.
std::vector<backend::Segment> frame_segments(const PixelInput& in);

// The (row, col) patch position of each input row, in the processor's row order.
struct PatchPos {
  int64_t r, c;
};
std::vector<PatchPos> patch_positions(const PixelInput& in, int64_t merge);

// The 2D rope tables (#rope) of rows at `pos`, into cos and sin ([rows, head_dim] f32): lanes
// [0, hd/4) and [hd/2, 3hd/4) turn with the row, the others with the column. When `order` is given,
// table row i is for position pos[order[i]] (a tower running in another row order).
void upload_rope(backend::Backend& backend, const std::vector<PatchPos>& pos, int64_t head_dim, double theta,
                 const backend::Tensor& cos, const backend::Tensor& sin, const std::vector<int64_t>* order = nullptr);

}  // namespace tessera::vit
