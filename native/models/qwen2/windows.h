// Qwen2.5-VL's window attention (docs/models/qwen2-vision.md#window-attention): the merge windows
// (merged tokens) of each frame are tiled into windows of `side` x `side` merged tokens from the
// top-left, the last row and column of windows cut short at the image's edges. A block other than the
// full-attention ones attends within each window. The tower runs in window order (each window's rows
// contiguous, as HF permutes them), so that a window is an attention segment; its stages are put back
// in the processor's order when they are downloaded.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/vision_model.h"

namespace tessera::qwen2 {

struct WindowOrder {
  std::vector<int64_t> tokens;  // window-order token i is processor token tokens[i]
  std::vector<int64_t> rows;    // the same at patch rows: merge² rows per token
  std::vector<backend::Segment> windows;  // in window-order rows
};

WindowOrder window_order(const PixelInput& in, int64_t merge, int64_t side);

}  // namespace tessera::qwen2
