// Rescale/normalise and patchify an RGB8 image into the rows HF's processors emit
// (docs/models/qwen-vision.md#rescale-and-normalise and #patchify; docs/models/gemma4-vision.md#patchify).
// Values go through a 256-entry table per channel built with HF's exact arithmetic, so the floats
// are bit-identical to the PIL backend's; the uint8 variants emit the same layout with rescale and
// normalise off (the fixtures' pixel_values_u8).
#pragma once
#include <array>
#include <cstdint>

namespace tessera {
class ThreadPool;
namespace image {

struct Normalize {
  bool do_rescale = true;
  double rescale_factor = 0.00392156862745098;  // 1/255 as a double
  bool do_normalize = false;
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
};

// lut[c * 256 + u]: v = f32(double(u) * factor) if do_rescale else f32(u); then, if do_normalize,
// v = f32(f32(v - mean_c) / std_c) (numpy float32 arithmetic, mean/std as float32).
std::array<float, 768> build_lut(const Normalize& n);

// Qwen: image is RGB8 w x h with w, h multiples of patch * merge. Rows in merge-window order
// (br, bc, ir, ic); row element ((c * temporal + t) * patch + y) * patch + x; the frame repeated
// `temporal` times. out holds (h/patch)*(w/patch) rows of 3*temporal*patch*patch values.
struct QwenLayout {
  int patch = 16, temporal = 2, merge = 2;
};
void patchify_qwen(const uint8_t* rgb, int w, int h, const QwenLayout& l, const float* lut, float* out,
                   ThreadPool* pool);
void patchify_qwen(const uint8_t* rgb, int w, int h, const QwenLayout& l, uint8_t* out, ThreadPool* pool);

// Gemma 4: rows row-major over the (h/patch) x (w/patch) patch grid, element (dy*patch + dx)*3 + c;
// positions[2n] = column, positions[2n+1] = row of patch n. Unpadded.
void patchify_gemma(const uint8_t* rgb, int w, int h, int patch, const float* lut, float* out, int32_t* positions,
                    ThreadPool* pool);
void patchify_gemma(const uint8_t* rgb, int w, int h, int patch, uint8_t* out, int32_t* positions, ThreadPool* pool);

}  // namespace image
}  // namespace tessera
