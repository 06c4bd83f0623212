#include "models/gemma4/block.h"

#include <algorithm>
#include <cmath>

#include "models/gemma4/clippable.h"
#include "models/vision_model.h"

namespace tessera::gemma4 {
namespace {

// Roles (the family's TowerSpec builder): HF's tensor names under the block's base; its linears are
// clippable (clippable.h).
constexpr const char* kAttnQ = "self_attn.q_proj";
constexpr const char* kAttnK = "self_attn.k_proj";
constexpr const char* kAttnV = "self_attn.v_proj";
constexpr const char* kAttnO = "self_attn.o_proj";
constexpr const char* kMlpGate = "mlp.gate_proj";
constexpr const char* kMlpUp = "mlp.up_proj";
constexpr const char* kMlpDown = "mlp.down_proj";

}  // namespace

std::vector<std::string> block_linear_roles() {
  std::vector<std::string> roles;
  for (const char* lin : {kAttnQ, kAttnK, kAttnV, kAttnO, kMlpGate, kMlpUp, kMlpDown}) roles.push_back(linear_weight(lin));
  return roles;
}

// Attention needs k and v of every token of an image, so they are whole; everything else in a
// block works token by token and runs one row chunk at a time (kRowChunk; the attention phase in
// chunks of hq's rows), q included:
//   1. per chunk: N1, then k and v; then over all rows k's norm with its rope (one op), and v's norm;
//   2. per chunk: N1 again (the same bits as in 1), q, its norm and rope, attention of the chunk's
//      query rows against all keys of their image, the o projection and the residual add. A chunk's
//      rows of x change only after k and v of every row are made, and q reads only its own rows.
//   3. per chunk: the MLP.
// Every row's arithmetic is the same as with whole tensors (the ops do not mix rows; attention's
// per-query result does not depend on the other queries in the call), so no result bit changes.
void run_block(backend::Backend& backend, const Dims& d, const StageWeights& w, const BlockTensors& t,
               const std::vector<backend::Segment>& segments) {
  const int64_t D = d.hidden, hd = d.head_dim, n = t.x.rows;
  const backend::LinearArgs cq = clamps(w, kAttnQ), ck = clamps(w, kAttnK), cv = clamps(w, kAttnV);
  for_row_chunks(n, t.hq.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor h = t.hq.rows_view(0, rows);
    backend.rms_norm(h, t.x.rows_view(r0, rows), &w.get("input_layernorm.weight"), D, d.eps, nullptr);
    backend.linear(t.k.rows_view(r0, rows), h, w.get(linear_weight(kAttnK)), ck);
    backend.linear(t.v.rows_view(r0, rows), h, w.get(linear_weight(kAttnV)), cv);
  });
  const backend::HeadNorm k_norm{&w.get("self_attn.k_norm.weight"), d.eps}, q_norm{&w.get("self_attn.q_norm.weight"), d.eps};
  backend.rope(t.k, t.cos, t.sin, d.heads, hd, 2, &k_norm);  // rope(N_k(k)) in one pass
  backend.rms_norm(t.v, t.v, nullptr, hd, d.eps, nullptr);

  const backend::LinearArgs co = clamps(w, kAttnO);
  for_row_chunks(n, t.hq.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor x = t.x.rows_view(r0, rows), h = t.hq.rows_view(0, rows), q = t.q.rows_view(0, rows);
    backend.rms_norm(h, x, &w.get("input_layernorm.weight"), D, d.eps, nullptr);
    backend.linear(q, h, w.get(linear_weight(kAttnQ)), cq);
    backend.rope(q, t.cos.rows_view(r0, rows), t.sin.rows_view(r0, rows), d.heads, hd, 2, &q_norm);  // rope(N_q(q))
    // Images never attend to each other: the chunk's rows of each image, against all that image's
    // keys (the op's one-segment form, backend/backend.h). The output overwrites q (allowed: each
    // query row is read before it is written).
    for (const backend::Segment& s : segments) {
      const int64_t a = std::max(r0, s.begin), b = std::min(r0 + rows, s.begin + s.length);
      if (a >= b) continue;
      const backend::Tensor qs = q.rows_view(a - r0, b - a);
      backend.attention(qs, qs, t.k.rows_view(s.begin, s.length), t.v.rows_view(s.begin, s.length), d.heads,
                         hd, 1.0f, {backend::Segment{0, s.length}}, kAttnProducts);
    }
    backend.linear(h, q, w.get(linear_weight(kAttnO)), co);
    backend.rms_norm(x, h, &w.get("post_attention_layernorm.weight"), D, d.eps, &x);  // x += N_pa(h)
  });

  const backend::LinearArgs cd = clamps(w, kMlpDown), cu = clamps(w, kMlpUp);
  backend::LinearArgs cg = clamps(w, kMlpGate);
  cg.act = backend::Act::GeluTanh;  // after the output clamp, as HF: act(CL_gate(m))
  const bool scaled = w.find("out_scale") != nullptr;
  const float out_scale = scalar(w, "out_scale", 1.0f);
  for_row_chunks(n, t.h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor x = t.x.rows_view(r0, rows), h = t.h.rows_view(0, rows);
    const backend::Tensor gate = t.gate.rows_view(0, rows), up = t.up.rows_view(0, rows);
    backend.rms_norm(h, x, &w.get("pre_feedforward_layernorm.weight"), D, d.eps, nullptr);
    backend.linear(gate, h, w.get(linear_weight(kMlpGate)), cg);
    backend::LinearArgs geglu = cu;  // the GEGLU product in the up linear's epilogue: up = CL_up(h) ⊙ gelu(CL_gate(h))
    geglu.mul = &gate;
    backend.linear(up, h, w.get(linear_weight(kMlpUp)), geglu);
    backend.linear(h, up, w.get(linear_weight(kMlpDown)), cd);
    backend.rms_norm(x, h, &w.get("post_feedforward_layernorm.weight"), D, d.eps, &x);  // x += N_pf(h)
    // A GGUF's per-block output scale (not in HF 5.17 checkpoints; Ollama multiplies the block output).
    if (scaled) backend.affine(x, x, nullptr, nullptr, out_scale, 0.0f);
  });
}

}  // namespace tessera::gemma4
