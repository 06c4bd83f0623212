#include "models/vit/merger.h"

#include "models/vision_model.h"

namespace tessera::vit {

void run_merger(backend::Backend& backend, const MergerConfig& c, const StageWeights& w, const backend::Tensor& x,
                const backend::Tensor& h, const backend::Tensor& mid, const backend::Tensor& merged) {
  const int64_t m2 = c.merge * c.merge, width = m2 * c.hidden;
  backend::LinearArgs up;
  up.bias = &w.get(c.up + ".bias");
  up.act = backend::Act::GeluErf;
  backend::LinearArgs down;
  down.bias = &w.get(c.down + ".bias");
  for_row_chunks(x.rows, h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor xs = x.rows_view(r0, rows), hs = h.rows_view(0, rows), ms = mid.rows_view(0, rows / m2);
    if (c.norm_before_group)
      norm(backend, c.norm, hs, xs, w, c.norm_role, c.eps);
    else
      norm(backend, c.norm, hs.reshaped(width), xs.reshaped(width), w, c.norm_role, c.eps);
    backend.linear(ms, hs.reshaped(width), w.get(c.up + ".weight"), up);
    backend.linear(merged.rows_view(r0 / m2, rows / m2), ms, w.get(c.down + ".weight"), down);
  });
}

std::vector<backend::LinearShape> merger_linears(const MergerConfig& c, int64_t n, int64_t chunk) {
  const int64_t m2 = c.merge * c.merge, W = m2 * c.hidden;
  std::vector<backend::LinearShape> l;
  for (int64_t rows : chunk_sizes(n, chunk)) l.insert(l.end(), {{rows / m2, W, W}, {rows / m2, W, c.out}});
  return l;
}

}  // namespace tessera::vit
