// Gemma 4 vision tower and projector, docs/models/gemma4-vision.md#forward-pass, as a composition of gpu ops:
//   embed:     x = (2·(pixels − 0.5))·W_patchᵀ + (Tab_x[x] + Tab_y[y])
//   block l:   x += N_pa(CL_o(attn(rope(N_q(CL_q(N1 x))), rope(N_k(CL_k(N1 x))), N_v(CL_v(N1 x)))))
//              x += N_pf(CL_down(gelu_tanh(CL_gate(N2 x)) ⊙ CL_up(N2 x)))        [· out_scale]  (block.h)
//   pooled:    3x3 average by position, · √D, (− std_bias) · std_scale when standardising
//   projected: RMSNorm (no weight) over D, then W_proj
// CL = clippable linear (input clamp, matmul, output clamp); N = RMSNorm with the weight as stored.
// Images of a batch are separate attention segments and pool separately; padding rows
// (position (−1, −1)) are dropped on the host before anything runs.
#include "models/gemma4/tower.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/patch_layout.h"
#include "models/arena.h"
#include "models/gemma4/block.h"
#include "models/gemma4/clippable.h"
#include "models/gemma4/inputs.h"

namespace tessera::gemma4 {
namespace {

// Roles (the family's TowerSpec builder): HF's tensor names under each stage's base
// (docs/models/gemma4-vision.md#tensors).
constexpr const char* kProjection = "embedding_projection";  // a plain linear: embedding_projection.weight
constexpr const char* kPatchWeight = "input_proj.weight";
std::string projection_weight() { return std::string(kProjection) + ".weight"; }

class Tower final : public VisionModel {
 public:
  Tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store, int64_t row_chunk)
      : spec_(spec), backend_(backend), store_(store), max_chunk_(std::max<int64_t>(1, row_chunk)) {
    d_.hidden = spec.i64("hidden");
    d_.heads = spec.i64("heads");
    d_.head_dim = spec.i64("head_dim");
    d_.qdim = d_.heads * d_.head_dim;
    d_.inter = spec.i64("intermediate");
    d_.out = spec.i64("out_hidden");
    d_.patch = spec.i64("patch_size");
    d_.patch_dim = patch_row_width(kImageChannels, 1, d_.patch);
    d_.pool = spec.i64("pooling_kernel");
    d_.pos_rows = spec.i64("pos_rows");
    d_.eps = float(spec.num("eps"));
    d_.theta = spec.num("rope_theta");
    d_.chw = spec.i64("patch_kernel_chw") != 0;
    d_.standardize = spec.i64("standardize") != 0;
    TESSERA_CHECK(d_.head_dim % 4 == 0 && d_.pool >= 1 && d_.hidden >= 1, "gemma4 tower spec dimensions");
  }

  uint64_t scratch_bytes(int64_t n) const override {
    return measure([&](Arena& a) { layout(a, n); }) + backend_.workspace_bytes(workload(n));
  }

  int64_t patch_width() const override { return d_.patch_dim; }
  int64_t out_width() const override { return d_.out; }
  int64_t tokens(int64_t patches) const override { return patches / (d_.pool * d_.pool); }

  std::vector<std::string> linear_weight_roles() const override {
    std::vector<std::string> roles = block_linear_roles();
    roles.insert(roles.end(), {kPatchWeight, projection_weight()});
    return roles;
  }

  void encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) override;

 private:
  // One encode's scratch for n patch rows (pooled rows: n / pool² for a valid grid).
  //   x (the residual stream), cos and sin (the rope tables): whole image, whole encode;
  //   then regions that one stage, or one phase of a block, uses at a time, over the same bytes:
  //     the embed's pixels and position sum;
  //     a block's k and v (whole image: every query row needs all its image's keys), and for one
  //       attention chunk hq (N1's output, then the o projection's) and q (attention writes its
  //       output over it);
  //     then an MLP chunk's h (N2's output, then the down projection's), gate and up over the
  //       spent k and v;
  //     the pooler's and projector's pooled, normed and projected rows.
  //   q per chunk rather than whole: at 10,080 rows a whole q is 46 MB more at the peak. The
  //   attention chunk is the MLP's, or half of it where the attention phase would then outgrow
  //   the MLP phase (whole k and v); docs/cpu.md#row-chunks says why (the measurements:
  //   docs/decisions/0009-row-chunks.md).
  //   Attention chunks are whole multiples of the backend's attention query block
  //   (Backend::attention_query_block: one that is not computes part of a block for nothing).
  struct Scratch {
    int64_t chunk, attn_chunk;  // rows per chunk of the MLP, and of the attention phase
    BlockTensors block;
    backend::Tensor pixels, pos, pooled, normed, projected;
    backend::Buffer *pos_lookup, *pool_lookup;  // gather_sum's: int32 indices + f32 weights
  };
  struct Chunks {
    int64_t mlp, attn;
  };
  Chunks chunks(int64_t n) const {
    const int64_t D = d_.hidden, Q = d_.qdim, F = d_.inter, mlp = std::min(n, chunk_rows(n, max_chunk_));
    // The attention phase at the MLP chunk, k and v included, against the MLP phase (bytes).
    const int64_t a = int64_t(dtype_size(backend_.activation_dtype())), qkv = int64_t(dtype_size(backend_.activation_dtype(kQkvRange)));
    const int64_t attn_bytes = 2 * n * Q * qkv + mlp * (D * a + Q * qkv), mlp_bytes = mlp * (D + 2 * F) * a;
    return {mlp, attn_bytes <= mlp_bytes
                     ? mlp
                     : std::min(mlp, chunk_rows(n, std::max<int64_t>(1, mlp / 2), backend_.attention_query_block(kAttnProducts)))};
  }
  Scratch layout(Arena& a, int64_t n) const {
    const int64_t m = tokens(n), D = d_.hidden, Q = d_.qdim, F = d_.inter;
    const DType act = backend_.activation_dtype();  // the rope tables and the uploaded pixels stay f32
    const DType qkv = backend_.activation_dtype(kQkvRange);  // block.h: q, k and v stay f32
    Scratch s;
    const Chunks c = chunks(n);
    s.chunk = c.mlp, s.attn_chunk = c.attn;
    s.block.x = a.tensor(n, D, act);
    s.block.cos = a.tensor(n, d_.head_dim);
    s.block.sin = a.tensor(n, d_.head_dim);
    {
      Arena::Scope embed(a);
      s.pixels = a.tensor(n, d_.patch_dim);
      s.pos = a.tensor(n, D, act);
    }
    {
      Arena::Scope attention(a);
      s.block.k = a.tensor(n, Q, qkv);
      s.block.v = a.tensor(n, Q, qkv);
      s.block.hq = a.tensor(c.attn, D, act);
      s.block.q = a.tensor(c.attn, Q, qkv);
    }
    {
      Arena::Scope mlp(a);
      s.block.h = a.tensor(c.mlp, D, act);
      s.block.gate = a.tensor(c.mlp, F, act);
      s.block.up = a.tensor(c.mlp, F, act);
    }
    s.pooled = a.tensor(m, D, act);
    s.normed = a.tensor(m, D, act);
    s.projected = a.tensor(m, d_.out, act);
    s.pos_lookup = a.buffer(uint64_t(n) * 2 * 8);
    s.pool_lookup = a.buffer(uint64_t(m) * uint64_t(d_.pool * d_.pool) * 8);
    return s;
  }
  backend::Workload workload(int64_t n) const {
    const int64_t D = d_.hidden, Q = d_.qdim, F = d_.inter;
    const Chunks c = chunks(n);
    backend::Workload work;
    work.linears = {{n, d_.patch_dim, D}, {tokens(n), D, d_.out}};  // embed, projector: whole
    for (int64_t rows : chunk_sizes(n, c.attn))  // q, k, v and o: per attention row chunk
      work.linears.insert(work.linears.end(), {{rows, D, Q}, {rows, Q, D}});
    for (int64_t rows : chunk_sizes(n, c.mlp))  // the MLP: per row chunk
      work.linears.insert(work.linears.end(), {{rows, D, F}, {rows, F, D}});
    work.max_segment = n;
    work.head_dim = d_.head_dim;
    return work;
  }

  const TowerSpec& spec_;
  backend::Backend& backend_;
  WeightStore& store_;
  Dims d_;
  int64_t max_chunk_;  // at most this many rows per chunk of the per-token work
};

void Tower::encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) {
  std::vector<int64_t> keep;
  const std::vector<Image> images = validate(d_, in, keep);
  const int64_t n = int64_t(keep.size()), D = d_.hidden;
  Arena arena(backend_, [&](Arena& a) { layout(a, n); });
  const Scratch s = layout(arena, n);
  const BlockTensors& t = s.block;
  upload_inputs(backend_, d_, in, keep, images,
                {t.x.buf, s.pixels.offset, t.cos.offset, t.sin.offset, s.pos_lookup, s.pool_lookup, s.pooled.rows});
  std::vector<backend::Segment> segments;  // one per image: images never attend to each other
  for (const Image& im : images) segments.push_back({im.begin, im.rows});

  const StageOps ops{"the Gemma 4 tower", {
    {"embed", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       // #patch-embedding: v = 2·(pixel − 0.5) in f32, then the patch matmul; #position-embedding:
       // + (Tab_x[x] + Tab_y[y]), the two taps summed first (into pos) as HF adds the tables before
       // adding them to e.
       backend_.affine(s.pixels, s.pixels, nullptr, nullptr, 2.0f, 0.5f);
       backend_.linear(t.x, s.pixels, w.get(kPatchWeight), backend::LinearArgs{});
       const backend::Tensor& table = w.get("position_embedding_table");  // [2, rows·D] → [2·rows, D], x table first
       backend_.gather_sum(s.pos, table.reshaped(D), s.pos_lookup, 2, false);
       backend_.add(t.x, t.x, s.pos);
       return {t.x, RowKind::Patch};
     }},
    {"block", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       run_block(backend_, d_, w, t, segments);
       return {t.x, RowKind::Patch};
     }},
    {"pooler", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       // #pooling: mean of each k×k bucket, · √D in f32, then standardise.
       backend_.gather_sum(s.pooled, t.x, s.pool_lookup, d_.pool * d_.pool, false);
       backend_.affine(s.pooled, s.pooled, nullptr, nullptr, float(std::sqrt(double(D))), 0.0f);
       if (d_.standardize) backend_.affine(s.pooled, s.pooled, &w.get("std_bias"), &w.get("std_scale"), 1.0f, 0.0f);
       return {s.pooled, RowKind::Token};
     }},
    {"projector", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       // #projector: weightless RMSNorm over D, then the projection (Ollama's reversed order is not HF's).
       backend_.rms_norm(s.normed, s.pooled, nullptr, D, d_.eps, nullptr);
       backend_.linear(s.projected, s.normed, w.get(projection_weight()), clamps(w, kProjection));
       return {s.projected, RowKind::Token, Emit::Embeddings};
     }},
  }};
  walk_stages(spec_, backend_, store_, ctl, out, ops);
}

}  // namespace

std::unique_ptr<VisionModel> make_tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk) {
  return std::make_unique<Tower>(spec, backend, store, row_chunk);
}

}  // namespace tessera::gemma4
