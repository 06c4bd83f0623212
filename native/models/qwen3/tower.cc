// Qwen3.5 / Qwen3-VL vision tower, docs/models/qwen-vision.md#forward-pass:
//   embed:     x = pixels · W_peᵀ + b  (+ bilinear position table, f32 taps)
//   block l:   x += proj(attn(rope(q), rope(k), v));  x += fc2(gelu_tanh(fc1(LN2(x))))   (vit::run_block)
//   deepstack: fc2(gelu_erf(fc1(LN_4D(group4(x)))))   after its block (Qwen3-VL)
//   merger:    fc2(gelu_erf(fc1(group4(LN_D(x)))))                                    (vit::run_merger)
// Rows are in merge-window order (#token-order), so grouping 4 rows is a reshape.
#include "models/qwen3/tower.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/patch_layout.h"
#include "models/arena.h"
#include "models/qwen3/inputs.h"
#include "models/vit/block.h"
#include "models/vit/grid.h"
#include "models/vit/merger.h"
#include "models/vit/scratch.h"

namespace tessera::qwen3 {
namespace {

// Roles (the family's TowerSpec builder): HF's tensor names under each stage's base.
constexpr const char* kPatchWeight = "patch_embed.proj.weight";

class Tower final : public VisionModel {
 public:
  Tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store, int64_t row_chunk)
      : spec_(spec), backend_(backend), store_(store), max_chunk_(std::max<int64_t>(1, row_chunk)) {
    const int64_t D = spec.i64("hidden");
    block_ = {.hidden = D, .heads = spec.i64("heads"), .head_dim = spec.i64("head_dim"),
              .inter = spec.i64("intermediate"), .eps = float(spec.num("eps")), .norm = vit::Norm::Layer,
              .mlp = vit::Mlp::Plain,
              .act = spec.num("mlp_act_erf") != 0 ? backend::Act::GeluErf : backend::Act::GeluTanh,
              .norm1 = "norm1", .norm2 = "norm2", .qkv = "attn.qkv", .proj = "attn.proj",
              .up = "mlp.linear_fc1", .gate = "", .down = "mlp.linear_fc2"};
    merger_ = {.hidden = D, .merge = spec.i64("merge_size"), .out = spec.i64("out_hidden"), .eps = block_.eps,
               .norm = vit::Norm::Layer, .norm_before_group = true, .norm_role = "norm", .up = "linear_fc1",
               .down = "linear_fc2"};
    deepstack_ = merger_;
    deepstack_.norm_before_group = false;
    patch_dim_ = patch_row_width(spec.i64("in_channels"), spec.i64("temporal_patch_size"), spec.i64("patch_size"));
    side_ = spec.i64("pos_side");
    theta_ = spec.num("rope_theta");
    TESSERA_CHECK(block_.heads * block_.head_dim == D && merger_.merge >= 1, "qwen3 tower spec dimensions");
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
  // One encode's scratch: vit's (models/vit/scratch.h) and the position taps (gather_sum's lookup buffer).
  struct Scratch : vit::Scratch {
    backend::Buffer* lookup;
  };
  Scratch layout(Arena& a, int64_t n) const {
    Scratch s{vit::layout_scratch(a, block_, merger_, n, max_chunk_, patch_dim_, backend_), nullptr};
    s.lookup = a.buffer(position_lookup_bytes(n));
    return s;
  }
  backend::Workload workload(int64_t n) const { return vit::scratch_workload(block_, merger_, n, max_chunk_, patch_dim_); }

  const TowerSpec& spec_;
  backend::Backend& backend_;
  WeightStore& store_;
  int64_t max_chunk_, patch_dim_, side_;
  double theta_;
  vit::BlockConfig block_;
  vit::MergerConfig merger_, deepstack_;
};

void Tower::encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) {
  vit::check_grids(in, patch_dim_, merger_.merge);
  const int64_t n = in.rows;
  Arena arena(backend_, [&](Arena& a) { layout(a, n); });
  const Scratch s = layout(arena, n);
  const vit::BlockTensors& t = s.block;
  backend_.upload(s.pixels.buf, s.pixels.offset, in.pixels, size_t(n) * size_t(patch_dim_) * 4);
  upload_position_taps(backend_, in, merger_.merge, side_, s.lookup);
  vit::upload_rope(backend_, vit::patch_positions(in, merger_.merge), block_.head_dim, theta_, t.cos, t.sin);
  const std::vector<backend::Segment> segments = vit::frame_segments(in);

  const StageOps ops{"the Qwen3 tower", {
    {"embed", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       backend::LinearArgs a;
       a.bias = &w.get("patch_embed.proj.bias");
       backend_.linear(t.x, s.pixels, w.get(kPatchWeight), a);
       backend_.gather_sum(t.x, w.get("pos_embed.weight"), s.lookup, 4, true);
       return {t.x, RowKind::Patch};
     }},
    {"block", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       vit::run_block(backend_, block_, w, t, segments);
       return {t.x, RowKind::Patch};
     }},
    {"deepstack", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       vit::run_merger(backend_, deepstack_, w, t.x, t.h, s.mid, s.merged);
       return {s.merged, RowKind::Token, Emit::Deepstack};
     }},
    {"merger", [&](const StageSpec&, const StageWeights& w) -> StageResult {
       vit::run_merger(backend_, merger_, w, t.x, t.h, s.mid, s.merged);
       return {s.merged, RowKind::Token, Emit::Embeddings};
     }},
  }};
  walk_stages(spec_, backend_, store_, ctl, out, ops);
}

}  // namespace

std::unique_ptr<VisionModel> make_tower(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk) {
  return std::make_unique<Tower>(spec, backend, store, row_chunk);
}

}  // namespace tessera::qwen3
