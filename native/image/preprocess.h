// One image, decoded pixels -> what HF's PIL-backend processor emits: convert to RGB8, Pillow
// bicubic resize to the target size chosen in TypeScript (src/image/sizing.ts), rescale/normalise,
// patchify. The N-API binding (native/addon/bind_image.cc) runs this on a worker thread.
#pragma once
#include <cstddef>
#include <cstdint>

#include "image/convert.h"
#include "image/patchify.h"

namespace tessera {
class ThreadPool;
namespace image {

enum class Layout { Qwen, Gemma };

struct PreprocessRequest {
  const void* pixels = nullptr;
  size_t pixel_bytes = 0;
  PixelFormat format = PixelFormat::RGB8;
  int width = 0, height = 0;                // decoded (upright) size
  bool has_transparent_rgb = false;         // see to_rgb8: GIF transparent-index colour
  uint8_t transparent_rgb[3] = {0, 0, 0};
  int target_width = 0, target_height = 0;  // resized size
  Layout layout = Layout::Qwen;
  QwenLayout qwen;  // Qwen: patch, temporal, merge
  int patch = 16;   // Gemma: patch size
  Normalize normalize;
  bool bytes_out = false;  // uint8 rows (rescale/normalise off) instead of float32
};

struct OutputShape {
  size_t rows = 0, row_len = 0;
  size_t values() const { return rows * row_len; }
};

// Validates the request (sizes, buffer length, grid divisibility) and returns the output shape.
OutputShape output_shape(const PreprocessRequest& r);

// Writes rows x row_len values (float32 or uint8 per bytes_out) into out, and for Gemma 2 int32
// per row into positions (may be null for Qwen). Uses the process-wide image thread pool.
void run_preprocess(const PreprocessRequest& r, void* out, int32_t* positions);

// Same with an explicit pool (null: single-threaded).
void run_preprocess(const PreprocessRequest& r, void* out, int32_t* positions, ThreadPool* pool);

}  // namespace image
}  // namespace tessera
