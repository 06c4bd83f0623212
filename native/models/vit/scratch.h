// The scratch and workload of a tower written in vit::run_block and vit::run_merger (the Qwen towers), laid
// out once over an Arena (models/arena.h), which measures it for the prediction and allocates it for the encode.
// x (the residual stream), cos and sin: whole image, whole encode; h (a norm's output): one row chunk, whole
// encode; then regions one stage, or one phase of a block, uses at a time, over the same bytes: the embed's
// pixels; a block's q | k | v (from its qkv linear to its projection); a block's MLP chunk once q | k | v are
// spent, which is also a merger's fc1 output ([chunk / merge², merge²·D], chunk x D values: hence the max), a
// gated MLP's gate beside it, and the merger's output, which is downloaded right after its stage, before the
// next block writes q | k | v. A tower adds what only it needs after these (Qwen3's position taps).
#pragma once
#include <algorithm>
#include <cstdint>

#include "models/arena.h"
#include "models/vision_model.h"
#include "models/vit/block.h"
#include "models/vit/merger.h"

namespace tessera::vit {

struct Scratch {
  int64_t chunk;  // rows per chunk of the per-token work: whole merge windows
  BlockTensors block;
  backend::Tensor pixels, mid, merged;
};

// Rows per chunk of an n-row encode: at most max_chunk, whole merge windows.
inline int64_t scratch_chunk(const MergerConfig& m, int64_t n, int64_t max_chunk) {
  return std::min(n, chunk_rows(n, max_chunk, m.merge * m.merge));
}

// The residual stream's range: backend::ActRange::Stream (f32 whatever the precision).
constexpr backend::ActRange kStreamRange = backend::ActRange::Stream;

// The activations' types from the backend (activation_dtype): x (the residual stream) kStreamRange's, the
// others Bounded; the rope tables and the uploaded pixels stay f32.
inline Scratch layout_scratch(Arena& a, const BlockConfig& b, const MergerConfig& m, int64_t n, int64_t max_chunk,
                              int64_t patch_dim, const backend::Backend& backend) {
  const int64_t D = b.hidden, I = b.inter, m2 = m.merge * m.merge;
  const DType act = backend.activation_dtype();
  Scratch s;
  s.chunk = scratch_chunk(m, n, max_chunk);
  s.block.x = a.tensor(n, D, backend.activation_dtype(kStreamRange));
  s.block.cos = a.tensor(n, b.head_dim);
  s.block.sin = a.tensor(n, b.head_dim);
  s.block.h = a.tensor(s.chunk, D, act);
  {
    Arena::Scope embed(a);
    s.pixels = a.tensor(n, patch_dim);
  }
  {
    Arena::Scope attention(a);
    s.block.qkv = a.tensor(n, 3 * D, act);
  }
  const backend::Tensor mlp = a.tensor(s.chunk, std::max(I, D), act);
  s.block.up = view_as(mlp, s.chunk, I);
  s.mid = view_as(mlp, s.chunk / m2, m2 * D);
  if (b.mlp == Mlp::Gated) s.block.gate = a.tensor(s.chunk, I, act);
  s.merged = a.tensor(n / m2, m.out, act);
  return s;
}

// The linears and attention an n-row encode runs: the blocks', the patch embedding's and the merger's.
inline backend::Workload scratch_workload(const BlockConfig& b, const MergerConfig& m, int64_t n, int64_t max_chunk,
                                          int64_t patch_dim) {
  const int64_t chunk = scratch_chunk(m, n, max_chunk);
  backend::Workload w;
  w.linears = block_linears(b, n, chunk);
  w.linears.push_back({n, patch_dim, b.hidden});
  for (const auto& l : merger_linears(m, n, chunk)) w.linears.push_back(l);
  w.max_segment = n;
  w.head_dim = b.head_dim;
  return w;
}

}  // namespace tessera::vit
