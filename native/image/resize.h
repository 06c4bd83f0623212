// Pillow-exact antialiased bicubic resize of 8-bit RGB images (Pillow's Resample.c, 8-bit path,
// as PIL's Image.resize(size, BICUBIC, reducing_gap=None) runs it; docs/models/qwen-vision.md#resize).
// Separable: a horizontal pass over just the source rows the vertical pass reads, into a uint8
// temporary, then a vertical pass; each pass is skipped when its axis keeps its size. Weights are
// computed in doubles and quantised to int32 with 22 fractional bits exactly as Pillow does, so the
// output bytes equal Pillow's for every size pair.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera {
class ThreadPool;
namespace image {

// One axis of a resample: for each output index o, the first input index and the tap count, and
// ksize int32 coefficients (taps past the count are zero).
struct ResampleAxis {
  int in_size = 0, out_size = 0, ksize = 0;
  std::vector<int32_t> first, count;
  std::vector<int32_t> coeffs;  // out_size x ksize
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for the bicubic filter (a = -0.5, support 2).
ResampleAxis bicubic_axis(int in_size, int out_size);

// Resizes interleaved 8-bit RGB (3 bytes per pixel, rows packed) from w x h to ow x oh.
// pool may be null (single-threaded). Throws InvalidArgument for empty sizes.
void resize_bicubic_rgb8(const uint8_t* src, int w, int h, uint8_t* dst, int ow, int oh, ThreadPool* pool);

}  // namespace image
}  // namespace tessera
