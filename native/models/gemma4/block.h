// Gemma 4's block (docs/models/gemma4-vision.md#forward-pass):
//   x += N_pa(CL_o(attn(rope(N_q(CL_q(N1 x))), rope(N_k(CL_k(N1 x))), N_v(CL_v(N1 x)))))
//   x += N_pf(CL_down(gelu_tanh(CL_gate(N2 x)) ⊙ CL_up(N2 x)))        [· out_scale]
// with clippable linears (clippable.h) and RMSNorms before and after each sub-layer. Unlike the Qwen
// towers' pre-norm block (vit/block.h) it norms q, k and v per head and after each sub-layer, and it
// makes q per row chunk (its whole-image q would be the largest buffer at the peak).
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/weight_store.h"
#include "models/gemma4/inputs.h"

namespace tessera::gemma4 {

// Attention's products stay f32 in precision bf16 (backend::AttnProducts): q and k are RMS-normed and
// the scale is 1, so the scores run to tens and the softmax is sharp enough that bf16 scores move
// the block past HF's own bf16 error (docs/bf16.md#what-runs has the figures).
constexpr backend::AttnProducts kAttnProducts = backend::AttnProducts::F32;
// For the same reason q, k and v stay f32 in precision 'f16' (backend::ActRange::Precise): their projections write
// f32 from half inputs and tiles, and the rope, v's norm and attention run on f32. Half storage of q and k moves a
// score by about half's relative step (2^-11) of the tens it reaches, the sharpest thing in the tower: measured one
// rounding at a time, no other activation's half storage costs a block as much, and with it one fixture stage
// landed past HF's own fp16 error (docs/metal.md#accuracy has the numbers). v goes with them so that attention is
// the f32 kernel, not a mixed one; o's projection reads the f32 output into half tiles.
constexpr backend::ActRange kQkvRange = backend::ActRange::Precise;

// x [n, D], cos and sin [n, head_dim], k and v [n, heads·head_dim] whole-image; hq [attention chunk,
// D] and q [attention chunk, heads·head_dim]; h [chunk, D], gate and up [chunk, intermediate].
struct BlockTensors {
  backend::Tensor x, cos, sin, k, v, hq, q, h, gate, up;
};

// One block over x in place; images (segments) never attend to each other.
void run_block(backend::Backend& backend, const Dims& d, const StageWeights& w, const BlockTensors& t,
               const std::vector<backend::Segment>& segments);

// The weight roles run_block only ever passes to linear().
std::vector<std::string> block_linear_roles();

}  // namespace tessera::gemma4
