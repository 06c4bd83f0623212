#include "models/qwen3/inputs.h"

#include <algorithm>
#include <cmath>

#include "common/patch_layout.h"

namespace tessera::qwen3 {

// Per-row bilinear taps into the position table (#position-embedding), in the #token-order.
// Host-side: O(rows), negligible next to one GEMM.
void upload_position_taps(backend::Backend& backend, const PixelInput& in, int64_t merge, int64_t side,
                          backend::Buffer* lookup) {
  const int64_t n = in.rows, S = side;
  std::vector<int32_t> idx(size_t(n) * 4);
  std::vector<float> wts(size_t(n) * 4);
  auto axis = [&](int64_t j, int64_t len, int64_t* i0, int64_t* i1, float* wa, float* wb) {
    float src = float(float(j * (S - 1)) / float(std::max<int64_t>(len - 1, 1)));
    float fl = std::floor(src), fr = src - fl;
    *i0 = int64_t(fl);
    *i1 = std::min<int64_t>(*i0 + 1, S - 1);
    *wa = float(1.0f - fr);
    *wb = float(1.0f - float(std::fabs(fr - 1.0f)));
  };
  int64_t row = 0;
  for (const auto& g : in.grids) {
    const int64_t h = g[1], w = g[2];
    for (int64_t f = 0; f < g[0]; ++f)
      for (int64_t i = 0; i < h * w; ++i, ++row) {
        const auto [r, c] = merge_window_patch(i, w, merge);
        int64_t r0, r1, c0, c1;
        float ar, brw, ac, bcw;
        axis(r, h, &r0, &r1, &ar, &brw);
        axis(c, w, &c0, &c1, &ac, &bcw);
        int32_t* ix = &idx[size_t(row) * 4];
        float* wt = &wts[size_t(row) * 4];
        ix[0] = int32_t(r0 * S + c0), wt[0] = ar * ac;
        ix[1] = int32_t(r0 * S + c1), wt[1] = ar * bcw;
        ix[2] = int32_t(r1 * S + c0), wt[2] = brw * ac;
        ix[3] = int32_t(r1 * S + c1), wt[3] = brw * bcw;
      }
  }
  backend.upload(lookup, 0, idx.data(), idx.size() * 4);
  backend.upload(lookup, idx.size() * 4, wts.data(), wts.size() * 4);
}

}  // namespace tessera::qwen3
