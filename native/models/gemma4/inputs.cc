// The host side of a Gemma 4 encode's inputs (inputs.h); the #anchors are
// docs/models/gemma4-vision.md's.
#include "models/gemma4/inputs.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/vit/rope.h"

namespace tessera::gemma4 {

// Splits the rows into images, drops padding rows (−1, −1) and checks that each image's positions
// form a full Wp × Hp patch grid with sides multiples of the pooling kernel (what HF's processor
// produces; #pooling relies on it: every pooled bucket has exactly k² patches).
std::vector<Image> validate(const Dims& d, const PixelInput& in, std::vector<int64_t>& keep) {
  if (in.cols != d.patch_dim)
    fail(Code::InvalidArgument, "pixelValues rows have " + std::to_string(in.cols) + " values; this tower expects " +
                                    std::to_string(d.patch_dim) + " (3 x " + std::to_string(d.patch) + " x " +
                                    std::to_string(d.patch) + ")");
  if (!in.positions) fail(Code::InvalidArgument, "a Gemma 4 tower needs positions (x, y) for every pixel row");
  if (in.rows < 1) fail(Code::InvalidArgument, "pixelValues is empty");
  std::vector<int64_t> sizes = in.image_rows;
  if (sizes.empty()) sizes.push_back(in.rows);
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 1) fail(Code::InvalidArgument, "imageRows entries must be positive");
    total += s;
  }
  if (total != in.rows)
    fail(Code::InvalidArgument, "imageRows add up to " + std::to_string(total) + " rows but pixelValues has " +
                                    std::to_string(in.rows));

  std::vector<Image> images;
  keep.clear();
  int64_t row = 0, pooled = 0;
  const int64_t k = d.pool;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Image im;
    im.begin = int64_t(keep.size());
    int64_t max_x = -1, max_y = -1;
    const std::string which = "image " + std::to_string(i) + ": ";
    for (int64_t r = row; r < row + sizes[i]; ++r) {
      const int32_t x = in.positions[2 * r], y = in.positions[2 * r + 1];
      if (x == -1 && y == -1) continue;  // padding (HF pads to max_soft_tokens · k² rows)
      if (x < 0 || y < 0 || x >= d.pos_rows || y >= d.pos_rows)
        fail(Code::InvalidArgument, which + "position (" + std::to_string(x) + ", " + std::to_string(y) + ") of row " +
                                        std::to_string(r) + " is outside [0, " + std::to_string(d.pos_rows) + ")");
      max_x = std::max<int64_t>(max_x, x);
      max_y = std::max<int64_t>(max_y, y);
      keep.push_back(r);
    }
    row += sizes[i];
    im.rows = int64_t(keep.size()) - im.begin;
    im.wp = max_x + 1;
    im.hp = max_y + 1;
    if (im.rows == 0) fail(Code::InvalidArgument, which + "has only padding rows");
    if (im.wp * im.hp != im.rows || im.wp % k || im.hp % k)
      fail(Code::InvalidArgument, which + std::to_string(im.rows) + " patches do not form a full grid of " +
                                      std::to_string(im.wp) + " x " + std::to_string(im.hp) +
                                      " with sides multiples of " + std::to_string(k));
    std::vector<uint8_t> seen(size_t(im.rows), 0);
    for (int64_t j = im.begin; j < im.begin + im.rows; ++j) {
      const int64_t r = keep[size_t(j)];
      uint8_t& s = seen[size_t(in.positions[2 * r + 1] * im.wp + in.positions[2 * r])];
      if (s) fail(Code::InvalidArgument, which + "position (" + std::to_string(in.positions[2 * r]) + ", " +
                                             std::to_string(in.positions[2 * r + 1]) + ") appears twice");
      s = 1;
    }
    im.pooled_begin = pooled;
    pooled += im.rows / (k * k);
    images.push_back(im);
  }
  return images;
}

// Host-side preparation, O(rows): the kept pixel rows (reordered to (c, py, px) when the patch
// kernel is GGUF's conv layout), the two position-table taps, the rope angles (#rope) and the
// pooling taps (#pooling).
void upload_inputs(backend::Backend& backend, const Dims& d, const PixelInput& in, const std::vector<int64_t>& keep,
                   const std::vector<Image>& images, const InputRegions& to) {
  const int64_t n = int64_t(keep.size()), pd = d.patch_dim, P = d.patch, P2 = P * P;
  const int64_t hd = d.head_dim, q4 = hd / 4, k = d.pool, k2 = k * k;

  HostFloats pix(size_t(n) * size_t(pd));
  for (int64_t j = 0; j < n; ++j) {
    const float* src = in.pixels + keep[size_t(j)] * pd;
    float* dst = pix.data() + j * pd;
    if (!d.chw) {
      std::copy(src, src + pd, dst);
    } else {
      for (int64_t s = 0; s < P2; ++s)
        for (int64_t c = 0; c < 3; ++c) dst[c * P2 + s] = src[s * 3 + c];
    }
  }
  backend.upload(to.scratch, to.pixels, pix.data(), pix.size() * 4);

  const std::vector<float> inv = rope_inverse_frequencies(d.theta, hd);
  std::vector<int32_t> pidx(size_t(n) * 2);
  std::vector<float> pw(size_t(n) * 2, 1.0f);
  HostFloats cs(size_t(n) * hd), sn(size_t(n) * hd);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t r = keep[size_t(j)];
    const int32_t x = in.positions[2 * r], y = in.positions[2 * r + 1];
    pidx[size_t(j) * 2] = x;
    pidx[size_t(j) * 2 + 1] = int32_t(d.pos_rows) + y;
    float* co = &cs[size_t(j) * hd];
    float* si = &sn[size_t(j) * hd];
    for (int64_t i = 0; i < q4; ++i) {
      const float ax = float(x) * inv[size_t(i)], ay = float(y) * inv[size_t(i)];
      co[i] = co[q4 + i] = std::cos(ax);
      si[i] = si[q4 + i] = std::sin(ax);
      co[2 * q4 + i] = co[3 * q4 + i] = std::cos(ay);
      si[2 * q4 + i] = si[3 * q4 + i] = std::sin(ay);
    }
  }
  backend.upload(to.pos_lookup, 0, pidx.data(), pidx.size() * 4);
  backend.upload(to.pos_lookup, pidx.size() * 4, pw.data(), pw.size() * 4);
  backend.upload(to.scratch, to.cos, cs.data(), cs.size() * 4);
  backend.upload(to.scratch, to.sin, sn.data(), sn.size() * 4);

  // Bucket of patch (x, y) = (x div k) + (Wp div k)·(y div k), row-major over the pooled grid.
  const int64_t m = to.pooled_rows;
  std::vector<int32_t> qidx(size_t(m * k2), -1);
  std::vector<int32_t> fill(size_t(m), 0);
  std::vector<float> qw(size_t(m * k2), 1.0f / float(k2));
  for (const Image& im : images)
    for (int64_t j = im.begin; j < im.begin + im.rows; ++j) {
      const int64_t r = keep[size_t(j)];
      const int64_t x = in.positions[2 * r], y = in.positions[2 * r + 1];
      const int64_t t = im.pooled_begin + x / k + (im.wp / k) * (y / k);
      qidx[size_t(t * k2 + fill[size_t(t)]++)] = int32_t(j);
    }
  backend.upload(to.pool_lookup, 0, qidx.data(), qidx.size() * 4);
  backend.upload(to.pool_lookup, qidx.size() * 4, qw.data(), qw.size() * 4);
}

}  // namespace tessera::gemma4
