// The layout of a tower's input rows, shared by the image pipeline that writes them
// (image/patchify.cc) and the towers that read them (models/): how wide a patch row is and, for
// Qwen, which patch each row holds (docs/models/qwen-vision.md#token-order).
#pragma once
#include <cstdint>

namespace tessera {

// Colour channels of every input image: HF's processors convert to RGB first.
constexpr int64_t kImageChannels = 3;

// Values in one patch row: channels x temporal x patch² (Gemma 4 has no temporal axis: 1).
constexpr int64_t patch_row_width(int64_t channels, int64_t temporal, int64_t patch) {
  return channels * temporal * patch * patch;
}

// Qwen's merge-window order: row r of one frame of a grid `grid_w` patches wide walks the
// merge x merge windows row-major, and the patches of each window row-major, so that every run of
// merge² consecutive rows is one window (the merger's grouping is then a reshape):
//   r = ((window_row * (grid_w / merge) + window_col) * merge + in_row) * merge + in_col.
struct PatchAt {
  int64_t row, col;  // in patches, within the frame
};
constexpr PatchAt merge_window_patch(int64_t r, int64_t grid_w, int64_t merge) {
  const int64_t in_col = r % merge, in_row = (r / merge) % merge, window = r / (merge * merge);
  const int64_t windows_per_row = grid_w / merge;
  return {(window / windows_per_row) * merge + in_row, (window % windows_per_row) * merge + in_col};
}

}  // namespace tessera
