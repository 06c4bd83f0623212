// The patch merger of the Qwen towers: groups of merge² consecutive rows (one merge window, the rows
// being in merge-window order) become one token, fc2(gelu_erf(fc1(group(N(x))))), with N over each
// row before grouping (the main mergers) or over the grouped merge²·D row (Qwen3-VL's deepstack).
// Row chunks hold whole merge windows, so each chunk writes its own rows of the output.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/weight_store.h"
#include "models/vit/block.h"

namespace tessera::vit {

struct MergerConfig {
  int64_t hidden = 0, merge = 0, out = 0;
  float eps = 0;
  Norm norm = Norm::Layer;
  bool norm_before_group = true;
  std::string norm_role, up, down;  // roles: "<role>.weight" (+ ".bias")
};

// x [n, D] in; h [chunk, D] and mid [chunk / merge², merge²·D] scratch; merged [n / merge², out] out.
void run_merger(backend::Backend& backend, const MergerConfig& c, const StageWeights& w, const backend::Tensor& x,
                const backend::Tensor& h, const backend::Tensor& mid, const backend::Tensor& merged);

// The merger's linears for n rows in chunks of `chunk` rows (whole merge windows).
std::vector<backend::LinearShape> merger_linears(const MergerConfig& c, int64_t n, int64_t chunk);

}  // namespace tessera::vit
