// Qwen3.5 / Qwen3-VL vision tower, docs/models/qwen-vision.md#forward-pass, as a composition of gpu ops:
//   embed:     x = pixels · W_peᵀ + b  (+ bilinear position table, f32 taps)
//   block l:   x += proj(attn(rope(q), rope(k), v));  x += fc2(gelu_tanh(fc1(LN2(x))))
//   deepstack: fc2(gelu_erf(fc1(LN_4D(group4(x)))))   after its block (Qwen3-VL)
//   merger:    fc2(gelu_erf(fc1(group4(LN_D(x)))))
// Tokens are in merge-window order (#token-order), so grouping 4 tokens is a reshape.
#include "models/qwen_vision.h"

#include <cmath>
#include <string>

#include "common/error.h"
#include "common/patch_layout.h"
#include "models/qwen_inputs.h"

namespace tessera {
namespace {

// Roles (src/spec/qwen.ts): HF's tensor names under each stage's base (docs/design.md#weight-names).
// The linear weights, each named once here: linear_weight_roles() lists them.
constexpr const char* kPatchWeight = "patch_embed.proj.weight";
constexpr const char* kQkvWeight = "attn.qkv.weight";
constexpr const char* kProjWeight = "attn.proj.weight";
constexpr const char* kMlpUpWeight = "mlp.linear_fc1.weight";
constexpr const char* kMlpDownWeight = "mlp.linear_fc2.weight";
constexpr const char* kMergerUpWeight = "linear_fc1.weight";    // merger and deepstack mergers
constexpr const char* kMergerDownWeight = "linear_fc2.weight";

class QwenVision final : public VisionModel {
 public:
  QwenVision(const TowerSpec& spec, backend::Backend& backend, WeightStore& store, int64_t row_chunk)
      : spec_(spec), backend_(backend), store_(store) {
    d_.hidden = spec.i64("hidden");
    d_.heads = spec.i64("heads");
    d_.head_dim = spec.i64("head_dim");
    d_.inter = spec.i64("intermediate");
    d_.out = spec.i64("out_hidden");
    d_.patch_dim = patch_row_width(spec.i64("in_channels"), spec.i64("temporal_patch_size"), spec.i64("patch_size"));
    d_.merge = spec.i64("merge_size");
    d_.side = spec.i64("pos_side");
    d_.eps = float(spec.num("eps"));
    d_.theta = spec.num("rope_theta");
    d_.mlp_act = spec.num("mlp_act_erf") != 0 ? backend::Act::GeluErf : backend::Act::GeluTanh;
    if (d_.heads * d_.head_dim != d_.hidden || d_.head_dim % 4 != 0)
      fail(Code::ConfigInvalid, "hidden_size must equal num_heads x head_dim with head_dim a multiple of 4");
    if (d_.merge < 1) fail(Code::ConfigInvalid, "merge_size must be positive");
    max_chunk_ = std::max<int64_t>(1, row_chunk);
  }

  // The plan's buffers plus the backend's own scratch for this tower's ops (one segment of all
  // the rows: the largest an input of `rows` can have).
  uint64_t scratch_bytes(int64_t rows) const override {
    Plan p = plan(rows);
    const int64_t D = d_.hidden, m2 = d_.merge * d_.merge, W = m2 * D;
    backend::Workload work;
    work.linears = {{rows, d_.patch_dim, D}, {rows, D, D}};  // embed, proj: whole image
    for (int64_t c : chunk_sizes(rows, p.chunk))              // qkv, fc1, fc2, the mergers: per chunk
      work.linears.insert(work.linears.end(),
                          {{c, D, 3 * D}, {c, D, d_.inter}, {c, d_.inter, D}, {c / m2, W, W}, {c / m2, W, d_.out}});
    work.max_segment = rows;
    work.head_dim = d_.head_dim;
    return p.plan.bytes() + p.lookup_bytes + backend_.workspace_bytes(work);
  }

  int64_t patch_width() const override { return d_.patch_dim; }
  int64_t out_width() const override { return d_.out; }
  int64_t tokens(int64_t patches) const override { return patches / (d_.merge * d_.merge); }

  std::vector<std::string> linear_weight_roles() const override {
    return {kPatchWeight, kQkvWeight, kProjWeight, kMlpUpWeight, kMlpDownWeight, kMergerUpWeight, kMergerDownWeight};
  }

  void encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) override;

 private:
  // The scratch plan: one definition for the allocator and for the prediction.
  //   x (the residual stream), cos and sin (the rope tables): whole image, whole encode;
  //   h (a norm's output): one row chunk, whole encode;
  //   then regions that one stage, or one phase of a block, uses at a time, over the same bytes:
  //     the embed's pixels;
  //     a block's q | k | v, from its qkv linear to its attention projection (attention writes
  //       its output over q, which the projection reads);
  //     a block's MLP chunk (fc1's output), once q | k | v are spent; a merger's fc1 output (a
  //       chunk's [rows / merge², merge²·D] = rows x D floats, hence the max) and its output,
  //       which collect downloads right after the stage, before the next block writes q | k | v.
  struct Plan {
    ScratchPlan plan;
    int64_t chunk;  // rows per chunk of the per-token work
    size_t x, cos, sin, h, pixels, qkv, mlp, merged;
    uint64_t lookup_bytes;  // gather_sum's own buffer: 4 int32 indices + 4 f32 weights per token
  };
  Plan plan(int64_t n) const {
    Plan p;
    const int64_t m2 = d_.merge * d_.merge, groups = n / m2;
    p.chunk = std::min(n, chunk_rows(n, max_chunk_, m2));  // a merger chunk holds whole merge windows
    const DType act = backend_.activation_dtype();  // the rope tables and the uploaded pixels stay f32
    p.x = p.plan.add(n, d_.hidden, act);
    p.cos = p.plan.add(n, d_.head_dim);
    p.sin = p.plan.add(n, d_.head_dim);
    p.h = p.plan.add(p.chunk, d_.hidden, act);
    const uint64_t per_stage = p.plan.mark();
    p.pixels = p.plan.add(n, d_.patch_dim);
    p.plan.reuse(per_stage);
    p.qkv = p.plan.add(n, 3 * d_.hidden, act);
    p.plan.reuse(per_stage);
    p.mlp = p.plan.add(p.chunk, std::max(d_.inter, d_.hidden), act);
    p.merged = p.plan.add(groups, d_.out, act);
    p.lookup_bytes = uint64_t(n) * 8 * 4;
    return p;
  }
  // Tensors over the plan's regions for one encode.
  struct Tensors {
    backend::Tensor x, cos, sin;
    backend::Tensor h, mlp;  // [chunk, D], [chunk, intermediate]
    backend::Tensor mid;     // mlp's region as the mergers' fc1 output [chunk / merge², merge²·D]
    backend::Tensor pixels, qkv, merged;
  };

  void run_block(const StageWeights& w, const Tensors& t, const std::vector<backend::Segment>& segments);
  void run_merger(const StageWeights& w, bool norm_before_group, const Tensors& t);

  const TowerSpec& spec_;
  backend::Backend& backend_;
  WeightStore& store_;
  qwen::Dims d_;
  int64_t max_chunk_;  // at most this many rows per chunk of the per-token work
};

// Attention needs q, k and v of every token, so they are whole-image; everything else in a block
// works token by token and runs one row chunk at a time (kRowChunk).
void QwenVision::run_block(const StageWeights& w, const Tensors& t, const std::vector<backend::Segment>& segments) {
  const int64_t D = d_.hidden, n = t.x.rows;
  backend::LinearArgs a;
  a.bias = &w.get("attn.qkv.bias");
  for_row_chunks(n, t.h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor h = t.h.rows_view(0, rows);
    backend_.layer_norm(h, t.x.rows_view(r0, rows), w.get("norm1.weight"), w.get("norm1.bias"), d_.eps);
    backend_.linear(t.qkv.rows_view(r0, rows), h, w.get(kQkvWeight), a);
  });
  backend::Tensor q = t.qkv.cols_view(0, D), k = t.qkv.cols_view(D, D), v = t.qkv.cols_view(2 * D, D);
  // q and k side by side in qkv are 2·heads heads with the same angles per row: one rope for both
  backend_.rope(t.qkv.cols_view(0, 2 * D), t.cos, t.sin, 2 * d_.heads, d_.head_dim, 1, nullptr);
  const backend::Tensor& attn = q;  // the output overwrites q (each query row is read before it is written)
  backend_.attention(attn, q, k, v, d_.heads, d_.head_dim, float(1.0 / std::sqrt(double(d_.head_dim))), segments);
  backend::LinearArgs proj;
  proj.bias = &w.get("attn.proj.bias");
  proj.residual = &t.x;
  backend_.linear(t.x, attn, w.get(kProjWeight), proj);

  backend::LinearArgs up;
  up.bias = &w.get("mlp.linear_fc1.bias");
  up.act = d_.mlp_act;
  backend::LinearArgs down;
  down.bias = &w.get("mlp.linear_fc2.bias");
  for_row_chunks(n, t.h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor x = t.x.rows_view(r0, rows), h = t.h.rows_view(0, rows), mlp = t.mlp.rows_view(0, rows);
    backend_.layer_norm(h, x, w.get("norm2.weight"), w.get("norm2.bias"), d_.eps);
    backend_.linear(mlp, h, w.get(kMlpUpWeight), up);
    down.residual = &x;
    backend_.linear(x, mlp, w.get(kMlpDownWeight), down);
  });
}

// Main merger (#merger): LN over D per token, then group 4 tokens. Deepstack (#deepstack): group first,
// then LN over 4D. Either way the normed, grouped [groups, 4D] tensor is h seen as 4D-wide rows.
// Row chunks hold whole merge windows, so each chunk writes its own rows of the output.
void QwenVision::run_merger(const StageWeights& w, bool norm_before_group, const Tensors& t) {
  const int64_t m2 = d_.merge * d_.merge, width = m2 * d_.hidden;
  backend::LinearArgs up;
  up.bias = &w.get("linear_fc1.bias");
  up.act = backend::Act::GeluErf;
  backend::LinearArgs down;
  down.bias = &w.get("linear_fc2.bias");
  for_row_chunks(t.x.rows, t.h.rows, [&](int64_t r0, int64_t rows) {
    const backend::Tensor x = t.x.rows_view(r0, rows), h = t.h.rows_view(0, rows), mid = t.mid.rows_view(0, rows / m2);
    if (norm_before_group)
      backend_.layer_norm(h, x, w.get("norm.weight"), w.get("norm.bias"), d_.eps);
    else
      backend_.layer_norm(h.reshaped(width), x.reshaped(width), w.get("norm.weight"), w.get("norm.bias"), d_.eps);
    backend_.linear(mid, h.reshaped(width), w.get(kMergerUpWeight), up);
    backend_.linear(t.merged.rows_view(r0 / m2, rows / m2), mid, w.get(kMergerDownWeight), down);
  });
}

void QwenVision::encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) {
  qwen::validate(d_, in);
  const int64_t n = in.rows, groups = tokens(n);
  Plan p = plan(n);
  ScopedBuffer scratch(backend_, p.plan.bytes()), lookup(backend_, p.lookup_bytes);
  const DType act = backend_.activation_dtype();
  auto tensor = [&](size_t region, int64_t rows, int64_t cols, DType dtype) {
    return backend::make_tensor(scratch.get(), p.plan.offset(region), dtype, rows, cols);
  };
  const int64_t chunk = p.chunk, m2 = d_.merge * d_.merge;
  Tensors t;
  t.x = tensor(p.x, n, d_.hidden, act);
  t.cos = tensor(p.cos, n, d_.head_dim, DType::F32);
  t.sin = tensor(p.sin, n, d_.head_dim, DType::F32);
  t.h = tensor(p.h, chunk, d_.hidden, act);
  t.mlp = tensor(p.mlp, chunk, d_.inter, act);
  t.mid = tensor(p.mlp, chunk / m2, m2 * d_.hidden, act);
  t.pixels = tensor(p.pixels, n, d_.patch_dim, DType::F32);
  t.qkv = tensor(p.qkv, n, 3 * d_.hidden, act);
  t.merged = tensor(p.merged, groups, d_.out, act);
  backend_.upload(scratch.get(), p.plan.offset(p.pixels), in.pixels, size_t(n) * size_t(d_.patch_dim) * 4);
  qwen::upload_positions(backend_, d_, in, {scratch.get(), p.plan.offset(p.cos), p.plan.offset(p.sin), lookup.get()});

  std::vector<backend::Segment> segments;  // one per frame (#attention)
  for (int64_t row = 0; const auto& g : in.grids)
    for (int64_t f = 0; f < g[0]; ++f, row += g[1] * g[2]) segments.push_back({row, g[1] * g[2]});

  auto run = [&](const StageSpec& stage, const StageWeights& w) -> StageResult {
    if (stage.kind == "embed") {
      backend::LinearArgs a;
      a.bias = &w.get("patch_embed.proj.bias");
      backend_.linear(t.x, t.pixels, w.get(kPatchWeight), a);
      backend_.gather_sum(t.x, w.get("pos_embed.weight"), lookup.get(), 4, true);
      return {t.x, RowKind::Patch};
    }
    if (stage.kind == "block") {
      run_block(w, t, segments);
      return {t.x, RowKind::Patch};
    }
    if (stage.kind == "deepstack" || stage.kind == "merger") {
      run_merger(w, stage.kind == "merger", t);
      return {t.merged, RowKind::Token};
    }
    fail(Code::ModelFormat, "stage '" + stage.name + "' has a kind the Qwen tower does not know: " + stage.kind);
  };
  auto collect = [&](const StageSpec& stage, const backend::Tensor& result) {
    if (stage.kind == "deepstack") out.deepstack.push_back(download_stage(backend_, result, stage.name).data);
    if (stage.kind == "merger") {
      out.tokens = groups;
      out.width = d_.out;
      out.embeddings = download_stage(backend_, result, stage.name).data;
    }
  };
  walk_stages(spec_, backend_, store_, ctl, out, run, collect);
  if (out.embeddings.empty()) fail(Code::ModelFormat, "the tower spec has no merger stage");
}

}  // namespace

std::unique_ptr<VisionModel> make_qwen_vision(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                              int64_t row_chunk) {
  return std::make_unique<QwenVision>(spec, backend, store, row_chunk);
}

}  // namespace tessera
