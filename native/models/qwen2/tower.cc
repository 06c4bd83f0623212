// Qwen2-VL / Qwen2.5-VL vision tower, docs/models/qwen2-vision.md#forward-pass:
//   embed:    x = pixels · W_peᵀ                      (Conv3d as a matmul, no bias, no position table)
//   block l:  x += proj(attn(rope(q), rope(k), v))    over frames, or Qwen2.5-VL's windows
//             x += fc2(quick_gelu(fc1(LN2(x))))       Qwen2-VL            (vit::run_block)
//             x += down(silu(gate(h)) ⊙ up(h)), h = RMS2(x)   Qwen2.5-VL
//   merger:   mlp.2(gelu_erf(mlp.0(group4(N(x)))))    N = LayerNorm (Qwen2-VL) or RMSNorm (Qwen2.5-VL)
// Rows are in merge-window order (#token-order), so grouping 4 rows is a reshape. Qwen2.5-VL runs in
// window order (windows.h) and reports its stages in the processor's order.
#include "models/qwen2/tower.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/patch_layout.h"
#include "models/arena.h"
#include "models/qwen2/windows.h"
#include "models/vit/block.h"
#include "models/vit/grid.h"
#include "models/vit/merger.h"
#include "models/vit/scratch.h"

namespace tessera::qwen2 {
namespace {

constexpr const char* kPatchWeight = "patch_embed.proj.weight";

class Tower final : public VisionModel {
 public:
  Tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store, int64_t row_chunk)
      : spec_(spec), backend_(backend), store_(store), max_chunk_(std::max<int64_t>(1, row_chunk)) {
    const bool v25 = spec.family == "qwen2_5_vl";
    const vit::Norm norm = v25 ? vit::Norm::Rms : vit::Norm::Layer;
    const int64_t D = spec.i64("hidden");
    block_ = {.hidden = D, .heads = spec.i64("heads"), .head_dim = spec.i64("head_dim"),
              .inter = spec.i64("intermediate"), .eps = float(spec.num("eps")), .norm = norm,
              .mlp = v25 ? vit::Mlp::Gated : vit::Mlp::Plain,
              .act = v25 ? backend::Act::Silu : backend::Act::QuickGelu,
              .norm1 = "norm1", .norm2 = "norm2", .qkv = "attn.qkv", .proj = "attn.proj",
              .up = v25 ? "mlp.up_proj" : "mlp.fc1", .gate = "mlp.gate_proj",
              .down = v25 ? "mlp.down_proj" : "mlp.fc2"};
    merger_ = {.hidden = D, .merge = spec.i64("merge_size"), .out = spec.i64("out_hidden"), .eps = block_.eps,
               .norm = norm, .norm_before_group = true, .norm_role = "ln_q", .up = "mlp.0", .down = "mlp.2"};
    patch_dim_ = patch_row_width(spec.i64("in_channels"), spec.i64("temporal_patch_size"), spec.i64("patch_size"));
    theta_ = spec.num("rope_theta");
    window_ = v25 ? spec.i64("window") : 0;
    for (double b : spec.list("fullatt_blocks")) full_.push_back(int64_t(b));
    TESSERA_CHECK(block_.heads * block_.head_dim == D && merger_.merge >= 1 && window_ >= 0, "qwen2 tower spec dimensions");
  }

  uint64_t scratch_bytes(int64_t n) const override {
    return measure([&](Arena& a) { layout(a, n); }) + backend_.workspace_bytes(workload(n));
  }
  int64_t patch_width() const override { return patch_dim_; }
  int64_t out_width() const override { return merger_.out; }
  int64_t tokens(int64_t patches) const override { return patches / (merger_.merge * merger_.merge); }
  std::vector<std::string> linear_weight_roles() const override {
    std::vector<std::string> roles = vit::block_linear_roles(block_);
    roles.insert(roles.end(), {kPatchWeight, merger_.up + ".weight", merger_.down + ".weight"});
    return roles;
  }
  void encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) override;

 private:
  using Scratch = vit::Scratch;
  Scratch layout(Arena& a, int64_t n) const {
    return vit::layout_scratch(a, block_, merger_, n, max_chunk_, patch_dim_, backend_);
  }
  backend::Workload workload(int64_t n) const { return vit::scratch_workload(block_, merger_, n, max_chunk_, patch_dim_); }

  const TowerSpec& spec_;
  backend::Backend& backend_;
  WeightStore& store_;
  int64_t max_chunk_, patch_dim_, window_;
  double theta_;
  std::vector<int64_t> full_;  // blocks attending over whole frames (all of them without windows)
  vit::BlockConfig block_;
  vit::MergerConfig merger_;
};

void Tower::encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) {
  vit::check_grids(in, patch_dim_, merger_.merge);
  const int64_t n = in.rows;
  Arena arena(backend_, [&](Arena& a) { layout(a, n); });
  const Scratch s = layout(arena, n);
  const vit::BlockTensors& t = s.block;
  const std::vector<backend::Segment> frames = vit::frame_segments(in);
  // Without windows the tower runs in the processor's order and every block attends over frames.
  const WindowOrder win = window_ > 0 ? window_order(in, merger_.merge, window_) : WindowOrder{};
  const std::vector<int64_t>* rows = window_ > 0 ? &win.rows : nullptr;
  const std::vector<int64_t>* tokens = window_ > 0 ? &win.tokens : nullptr;
  if (rows) {
    HostFloats pixels(size_t(n) * size_t(patch_dim_));
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(in.pixels + (*rows)[size_t(i)] * patch_dim_, patch_dim_, pixels.begin() + i * patch_dim_);
    backend_.upload(s.pixels.buf, s.pixels.offset, pixels.data(), pixels.size() * 4);
  } else {
    backend_.upload(s.pixels.buf, s.pixels.offset, in.pixels, size_t(n) * size_t(patch_dim_) * 4);
  }
  vit::upload_rope(backend_, vit::patch_positions(in, merger_.merge), block_.head_dim, theta_, t.cos, t.sin, rows);

  const StageOps ops{"the Qwen2 tower", {
    {"embed", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       backend_.linear(t.x, s.pixels, w.get(kPatchWeight), backend::LinearArgs{});
       return {t.x, RowKind::Patch, Emit::None, rows};
     }},
    {"block", [&](const StageSpec& stage, const StageWeights& w) -> StageResult {
       const bool full = !window_ || std::find(full_.begin(), full_.end(), stage.index) != full_.end();
       vit::run_block(backend_, block_, w, t, full ? frames : win.windows);
       return {t.x, RowKind::Patch, Emit::None, rows};
     }},
    {"merger", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       vit::run_merger(backend_, merger_, w, t.x, t.h, s.mid, s.merged);
       return {s.merged, RowKind::Token, Emit::Embeddings, tokens};
     }},
  }};
  walk_stages(spec_, backend_, store_, ctl, out, ops);
}

}  // namespace

std::unique_ptr<VisionModel> make_tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk) {
  return std::make_unique<Tower>(spec, backend, store, row_chunk);
}

}  // namespace tessera::qwen2
