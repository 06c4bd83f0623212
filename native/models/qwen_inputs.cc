// The host side of a Qwen encode's inputs (qwen_inputs.h); the #anchors are docs/models/qwen-vision.md's.
#include "models/qwen_inputs.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/patch_layout.h"
#include "models/rope.h"

namespace tessera::qwen {

void validate(const Dims& d, const PixelInput& in) {
  if (in.cols != d.patch_dim)
    fail(Code::InvalidArgument, "pixelValues rows have " + std::to_string(in.cols) + " values; this tower expects " +
                                    std::to_string(d.patch_dim));
  if (in.grids.empty()) fail(Code::InvalidArgument, "grid is empty");
  int64_t total = 0;
  for (size_t i = 0; i < in.grids.size(); ++i) {
    auto [t, h, w] = in.grids[i];
    if (t < 1 || h < 1 || w < 1 || h % d.merge || w % d.merge)
      fail(Code::InvalidArgument, "grid " + std::to_string(i) + " (" + std::to_string(t) + ", " + std::to_string(h) +
                                      ", " + std::to_string(w) + ") must be positive with h and w multiples of " +
                                      std::to_string(d.merge));
    total += t * h * w;
  }
  if (total != in.rows)
    fail(Code::InvalidArgument, "grid describes " + std::to_string(total) + " patches but pixelValues has " +
                                    std::to_string(in.rows) + " rows");
}

// Per-token bilinear taps into the position table (#position-embedding) and the 2D rope angles (#rope),
// in the #token-order. Host-side: O(tokens), negligible next to one GEMM.
void upload_positions(backend::Backend& backend, const Dims& d, const PixelInput& in, const PositionRegions& to) {
  const int64_t n = in.rows, hd = d.head_dim, q4 = hd / 4, S = d.side, m = d.merge;
  std::vector<int32_t> idx(size_t(n) * 4);
  std::vector<float> wts(size_t(n) * 4);
  HostFloats cs(size_t(n) * hd), sn(size_t(n) * hd);  // mapped when large: see HostFloats
  const std::vector<float> inv = rope_inverse_frequencies(d.theta, hd);

  auto axis = [&](int64_t j, int64_t len, int64_t* i0, int64_t* i1, float* wa, float* wb) {
    float src = float(float(j * (S - 1)) / float(std::max<int64_t>(len - 1, 1)));
    float fl = std::floor(src), fr = src - fl;
    *i0 = int64_t(fl);
    *i1 = std::min<int64_t>(*i0 + 1, S - 1);
    *wa = float(1.0f - fr);
    *wb = float(1.0f - float(std::fabs(fr - 1.0f)));
  };

  int64_t row_index = 0;
  for (const auto& g : in.grids) {
    const int64_t t = g[0], h = g[1], w = g[2];
    for (int64_t f = 0; f < t; ++f)
      for (int64_t i = 0; i < h * w; ++i, ++row_index) {
        const auto [r, c] = merge_window_patch(i, w, m);
        int64_t r0, r1, c0, c1;
        float ar, brw, ac, bcw;
        axis(r, h, &r0, &r1, &ar, &brw);
        axis(c, w, &c0, &c1, &ac, &bcw);
        int32_t* ix = &idx[size_t(row_index) * 4];
        float* wt = &wts[size_t(row_index) * 4];
        ix[0] = int32_t(r0 * S + c0), wt[0] = ar * ac;
        ix[1] = int32_t(r0 * S + c1), wt[1] = ar * bcw;
        ix[2] = int32_t(r1 * S + c0), wt[2] = brw * ac;
        ix[3] = int32_t(r1 * S + c1), wt[3] = brw * bcw;
        float* co = &cs[size_t(row_index) * hd];
        float* si = &sn[size_t(row_index) * hd];
        for (int64_t j = 0; j < q4; ++j) {
          const float ang_r = float(r) * inv[size_t(j)], ang_c = float(c) * inv[size_t(j)];
          for (int64_t rep = 0; rep < 2; ++rep) {
            co[rep * 2 * q4 + j] = std::cos(ang_r);
            si[rep * 2 * q4 + j] = std::sin(ang_r);
            co[rep * 2 * q4 + q4 + j] = std::cos(ang_c);
            si[rep * 2 * q4 + q4 + j] = std::sin(ang_c);
          }
        }
      }
  }
  backend.upload(to.lookup, 0, idx.data(), idx.size() * 4);
  backend.upload(to.lookup, idx.size() * 4, wts.data(), wts.size() * 4);
  backend.upload(to.scratch, to.cos, cs.data(), cs.size() * 4);
  backend.upload(to.scratch, to.sin, sn.data(), sn.size() * 4);
}

}  // namespace tessera::qwen
