// The pre-norm ViT block the Qwen towers are written in (in the spirit of clip.cpp's build_vit):
//   x += proj(attention(rope(q), rope(k), v))   with q | k | v = qkv(N1(x)), over attention segments
//   x += down(mlp(N2(x)))                       mlp: act(up(h)) (plain) or act(gate(h)) ⊙ up(h) (gated)
// parameterised by the norm (LayerNorm with bias, or RMSNorm), the MLP (plain or gated), its
// activation and the roles of its weights. Attention needs q, k and v of every row, so they are
// whole-image; the norms and the MLP work row by row and run one row chunk at a time (kRowChunk).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/weight_store.h"

namespace tessera::vit {

enum class Norm { Layer, Rms };  // LayerNorm (weight, bias) or RMSNorm (weight)
enum class Mlp { Plain, Gated };

struct BlockConfig {
  int64_t hidden = 0, heads = 0, head_dim = 0, inter = 0;
  float eps = 0;
  Norm norm = Norm::Layer;
  Mlp mlp = Mlp::Plain;
  backend::Act act = backend::Act::None;
  // Roles under the block's base (HF's names): norms take "<role>.weight" (and ".bias" for
  // LayerNorm), linears "<role>.weight" and "<role>.bias". gate is read only by a gated MLP.
  std::string norm1, norm2, qkv, proj, up, gate, down;
};

// The block's tensors, laid out by the tower (whose regions they share): x [n, D] the residual
// stream; cos, sin [n, head_dim] the rope tables; qkv [n, 3D]; h [chunk, D]; up [chunk, inter] and,
// for a gated MLP, gate [chunk, inter].
struct BlockTensors {
  backend::Tensor x, cos, sin, qkv, h, up, gate;
};

// One block over x in place: attention within each of `segments` (rows that attend to each other).
void run_block(backend::Backend& backend, const BlockConfig& c, const StageWeights& w, const BlockTensors& t,
               const std::vector<backend::Segment>& segments);

// The linears a block issues for n rows in chunks of `chunk` (what backend::Workload lists).
std::vector<backend::LinearShape> block_linears(const BlockConfig& c, int64_t n, int64_t chunk);

// The weight roles run_block only ever passes to linear() (VisionModel::linear_weight_roles).
std::vector<std::string> block_linear_roles(const BlockConfig& c);

// Applies a block norm: y = N(x) with the weights at `role`.
void norm(backend::Backend& backend, Norm kind, const backend::Tensor& y, const backend::Tensor& x,
          const StageWeights& w, const std::string& role, float eps);

}  // namespace tessera::vit
