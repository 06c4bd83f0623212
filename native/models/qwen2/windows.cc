#include "models/qwen2/windows.h"

#include <algorithm>

namespace tessera::qwen2 {

WindowOrder window_order(const PixelInput& in, int64_t merge, int64_t side) {
  const int64_t m2 = merge * merge;
  WindowOrder o;
  int64_t first = 0, row = 0;  // the frame's first processor token; the next window's first row
  for (const auto& g : in.grids) {
    const int64_t th = g[1] / merge, tw = g[2] / merge;  // the frame in merged tokens
    for (int64_t f = 0; f < g[0]; ++f, first += th * tw)
      for (int64_t wr = 0; wr < th; wr += side)
        for (int64_t wc = 0; wc < tw; wc += side) {
          const int64_t h = std::min(side, th - wr), w = std::min(side, tw - wc);
          for (int64_t r = wr; r < wr + h; ++r)
            for (int64_t c = wc; c < wc + w; ++c) o.tokens.push_back(first + r * tw + c);
          o.windows.push_back({row, h * w * m2});
          row += h * w * m2;
        }
  }
  o.rows.reserve(o.tokens.size() * size_t(m2));
  for (int64_t t : o.tokens)
    for (int64_t k = 0; k < m2; ++k) o.rows.push_back(t * m2 + k);
  return o;
}

}  // namespace tessera::qwen2
