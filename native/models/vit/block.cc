#include "models/vit/block.h"

#include <cmath>

#include "models/vision_model.h"

namespace tessera::vit {

void norm(backend::Backend& backend, Norm kind, const backend::Tensor& y, const backend::Tensor& x,
          const StageWeights& w, const std::string& role, float eps) {
  if (kind == Norm::Layer)
    backend.layer_norm(y, x, w.get(role + ".weight"), w.get(role + ".bias"), eps);
  else
    backend.rms_norm(y, x, &w.get(role + ".weight"), x.cols, eps, nullptr);
}

void run_block(backend::Backend& backend, const BlockConfig& c, const StageWeights& w, const BlockTensors& t,
               const std::vector<backend::Segment>& segments) {
  const int64_t D = c.hidden, n = t.x.rows;
  backend::LinearArgs qkv;
  qkv.bias = &w.get(c.qkv + ".bias");
  for_row_chunks(n, t.h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor h = t.h.rows_view(0, rows);
    norm(backend, c.norm, h, t.x.rows_view(r0, rows), w, c.norm1, c.eps);
    backend.linear(t.qkv.rows_view(r0, rows), h, w.get(c.qkv + ".weight"), qkv);
  });
  const backend::Tensor q = t.qkv.cols_view(0, D), k = t.qkv.cols_view(D, D), v = t.qkv.cols_view(2 * D, D);
  // q and k side by side in qkv are 2·heads heads with the same angles per row: one rope for both
  backend.rope(t.qkv.cols_view(0, 2 * D), t.cos, t.sin, 2 * c.heads, c.head_dim, 1, nullptr);
  const backend::Tensor& attn = q;  // the output overwrites q (each query row is read before it is written)
  backend.attention(attn, q, k, v, c.heads, c.head_dim, float(1.0 / std::sqrt(double(c.head_dim))), segments);
  backend::LinearArgs proj;
  proj.bias = &w.get(c.proj + ".bias");
  proj.residual = &t.x;
  backend.linear(t.x, attn, w.get(c.proj + ".weight"), proj);

  backend::LinearArgs up, gate, down;
  up.bias = &w.get(c.up + ".bias");
  down.bias = &w.get(c.down + ".bias");
  if (c.mlp == Mlp::Plain) {
    up.act = c.act;
  } else {
    gate.bias = &w.get(c.gate + ".bias");
    gate.act = c.act;
  }
  for_row_chunks(n, t.h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor x = t.x.rows_view(r0, rows), h = t.h.rows_view(0, rows), u = t.up.rows_view(0, rows);
    norm(backend, c.norm, h, x, w, c.norm2, c.eps);
    if (c.mlp == Mlp::Gated) {
      // act(gate(h)) ⊙ up(h) in the up linear's epilogue (LinearArgs::mul; f32 products commute)
      const backend::Tensor g = t.gate.rows_view(0, rows);
      backend.linear(g, h, w.get(c.gate + ".weight"), gate);
      up.mul = &g;
      backend.linear(u, h, w.get(c.up + ".weight"), up);
    } else {
      backend.linear(u, h, w.get(c.up + ".weight"), up);
    }
    down.residual = &x;
    backend.linear(x, u, w.get(c.down + ".weight"), down);
  });
}

std::vector<backend::LinearShape> block_linears(const BlockConfig& c, int64_t n, int64_t chunk) {
  const int64_t D = c.hidden;
  std::vector<backend::LinearShape> l{{n, D, D}};  // proj: whole image
  for (int64_t rows : chunk_sizes(n, chunk)) {     // qkv and the MLP: per chunk
    l.insert(l.end(), {{rows, D, 3 * D}, {rows, D, c.inter}, {rows, c.inter, D}});
    if (c.mlp == Mlp::Gated) l.push_back({rows, D, c.inter});
  }
  return l;
}

std::vector<std::string> block_linear_roles(const BlockConfig& c) {
  std::vector<std::string> roles{c.qkv + ".weight", c.proj + ".weight", c.up + ".weight", c.down + ".weight"};
  if (c.mlp == Mlp::Gated) roles.push_back(c.gate + ".weight");
  return roles;
}

}  // namespace tessera::vit
