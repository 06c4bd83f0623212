#include "models/vit/grid.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "common/patch_layout.h"
#include "models/vit/rope.h"

namespace tessera::vit {

void check_grids(const PixelInput& in, int64_t patch_width, int64_t merge) {
  if (in.cols != patch_width)
    fail(Code::InvalidArgument, "pixelValues rows have " + std::to_string(in.cols) + " values; this tower expects " +
                                    std::to_string(patch_width));
  if (in.grids.empty()) fail(Code::InvalidArgument, "grid is empty");
  int64_t total = 0;
  for (size_t i = 0; i < in.grids.size(); ++i) {
    auto [t, h, w] = in.grids[i];
    if (t < 1 || h < 1 || w < 1 || h % merge || w % merge)
      fail(Code::InvalidArgument, "grid " + std::to_string(i) + " (" + std::to_string(t) + ", " + std::to_string(h) +
                                      ", " + std::to_string(w) + ") must be positive with h and w multiples of " +
                                      std::to_string(merge));
    total += t * h * w;
  }
  if (total != in.rows)
    fail(Code::InvalidArgument, "grid describes " + std::to_string(total) + " patches but pixelValues has " +
                                    std::to_string(in.rows) + " rows");
}

std::vector<backend::Segment> frame_segments(const PixelInput& in) {
  std::vector<backend::Segment> segments;
  for (int64_t row = 0; const auto& g : in.grids)
    for (int64_t f = 0; f < g[0]; ++f, row += g[1] * g[2]) segments.push_back({row, g[1] * g[2]});
  return segments;
}

std::vector<PatchPos> patch_positions(const PixelInput& in, int64_t merge) {
  std::vector<PatchPos> pos;
  pos.reserve(size_t(in.rows));
  for (const auto& g : in.grids)
    for (int64_t f = 0; f < g[0]; ++f)
      for (int64_t i = 0; i < g[1] * g[2]; ++i) {
        const auto [r, c] = merge_window_patch(i, g[2], merge);
        pos.push_back({r, c});
      }
  return pos;
}

void upload_rope(backend::Backend& backend, const std::vector<PatchPos>& pos, int64_t head_dim, double theta,
                 const backend::Tensor& cos, const backend::Tensor& sin, const std::vector<int64_t>* order) {
  const int64_t n = int64_t(pos.size()), hd = head_dim, q4 = hd / 4;
  HostFloats cs(size_t(n) * hd), sn(size_t(n) * hd);  // mapped when large: see HostFloats
  const std::vector<float> inv = rope_inverse_frequencies(theta, hd);
  for (int64_t row = 0; row < n; ++row) {
    const PatchPos p = pos[size_t(order ? (*order)[size_t(row)] : row)];
    float* co = &cs[size_t(row) * hd];
    float* si = &sn[size_t(row) * hd];
    for (int64_t j = 0; j < q4; ++j) {
      const float ang_r = float(p.r) * inv[size_t(j)], ang_c = float(p.c) * inv[size_t(j)];
      for (int64_t rep = 0; rep < 2; ++rep) {
        co[rep * 2 * q4 + j] = std::cos(ang_r);
        si[rep * 2 * q4 + j] = std::sin(ang_r);
        co[rep * 2 * q4 + q4 + j] = std::cos(ang_c);
        si[rep * 2 * q4 + q4 + j] = std::sin(ang_c);
      }
    }
  }
  backend.upload(cos.buf, cos.offset, cs.data(), cs.size() * 4);
  backend.upload(sin.buf, sin.offset, sn.data(), sn.size() * 4);
}

}  // namespace tessera::vit
