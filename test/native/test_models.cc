// The towers' memory plan, on small random towers run by the CPU backend: an encode split into
// many row chunks (row_chunk lowered far below kRowChunk, with a ragged last chunk) gives every
// stage output bit for bit equal to a one-chunk encode, and scratch_bytes() is exactly what an
// encode allocates plus the backend workspace it leaves behind (exact for f32 weights the backend
// packs as it reads, a bound otherwise). Weights f32 and bf16, packed at open (resident) or not.
// (Agreement with HF is the fixture tests' job: their inputs fit in one chunk.)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "cpu/cpu_backend.h"
#include "harness.h"
#include "io/resident_store.h"
#include "io_test_util.h"
#include "models_test_util.h"
#include "models/qwen2/windows.h"
#include "models/vision_model.h"

using namespace tessera;

namespace {

// A tower's weights in one raw file: tensors back to back (64-byte aligned), random values.
struct TowerFile {
  TowerSpec spec;
  std::vector<unsigned char> bytes;
  std::mt19937 rng{1234};
  DType dt = DType::BF16;  // every tensor's dtype

  // Values uniform in center ± spread.
  void add(StageSpec& st, const std::string& role, std::vector<int64_t> shape, float center = 0.0f,
           float spread = 0.2f) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    bytes.resize((bytes.size() + 63) / 64 * 64);
    TensorSpec t;
    t.role = role;
    t.name = st.name + "." + role;
    t.dtype = dt;
    t.shape = std::move(shape);
    t.offset = bytes.size();
    t.length = uint64_t(n) * dtype_size(dt);
    std::uniform_real_distribution<float> u(center - spread, center + spread);
    for (int64_t i = 0; i < n; ++i) {
      const float v = u(rng);
      unsigned char b[4];
      if (dt == DType::F32) {
        std::memcpy(b, &v, 4);
      } else {
        const uint16_t h = dt == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(b, &h, 2);
      }
      bytes.insert(bytes.end(), b, b + dtype_size(dt));
    }
    st.tensors.push_back(t);
  }
  StageSpec& stage(const std::string& name, const std::string& kind, int index = 0) {
    spec.stages.push_back({});
    StageSpec& st = spec.stages.back();
    st.name = name;
    st.kind = kind;
    st.index = index;
    return st;
  }
};

// Qwen3-VL shaped: 2 blocks, a deepstack merger after block 0, the merger. D 32 = 2 heads of 16.
TowerFile qwen_tower(DType dt) {
  TowerFile f;
  f.dt = dt;
  const int64_t D = 32, I = 48, O = 24, C = 3, T = 2, P = 2, side = 4, W = 4 * D;
  f.spec.family = "qwen3_vl";
  f.spec.dims = {{"hidden", D},          {"heads", 2},   {"head_dim", 16},         {"intermediate", I},
                 {"out_hidden", O},      {"in_channels", C}, {"temporal_patch_size", T}, {"patch_size", P},
                 {"merge_size", 2},      {"pos_side", side}, {"eps", 1e-6},             {"rope_theta", 10000},
                 {"mlp_act_erf", 0}};
  StageSpec* st = &f.stage("embed", "embed");
  f.add(*st, "patch_embed.proj.weight", {D, C * T * P * P});
  f.add(*st, "patch_embed.proj.bias", {D});
  f.add(*st, "pos_embed.weight", {side * side, D});
  auto merger = [&](StageSpec& s, int64_t norm) {
    f.add(s, "norm.weight", {norm}, 1.0f);
    f.add(s, "norm.bias", {norm});
    f.add(s, "linear_fc1.weight", {W, W});
    f.add(s, "linear_fc1.bias", {W});
    f.add(s, "linear_fc2.weight", {O, W});
    f.add(s, "linear_fc2.bias", {O});
  };
  for (int l = 0; l < 2; ++l) {
    st = &f.stage("block." + std::to_string(l), "block", l);
    f.add(*st, "norm1.weight", {D}, 1.0f);
    f.add(*st, "norm1.bias", {D});
    f.add(*st, "attn.qkv.weight", {3 * D, D});
    f.add(*st, "attn.qkv.bias", {3 * D});
    f.add(*st, "attn.proj.weight", {D, D});
    f.add(*st, "attn.proj.bias", {D});
    f.add(*st, "norm2.weight", {D}, 1.0f);
    f.add(*st, "norm2.bias", {D});
    f.add(*st, "mlp.linear_fc1.weight", {I, D});
    f.add(*st, "mlp.linear_fc1.bias", {I});
    f.add(*st, "mlp.linear_fc2.weight", {D, I});
    f.add(*st, "mlp.linear_fc2.bias", {D});
    if (l == 0) merger(f.stage("deepstack.0", "deepstack", 0), W);
  }
  merger(f.stage("merged", "merger"), D);
  return f;
}

// Qwen2-VL (LayerNorm, QuickGELU MLP) or Qwen2.5-VL shaped (RMSNorm, gated SiLU MLP, windows of 2x2
// merged tokens, block 1 attending over whole frames): 2 blocks and the merger. D 32 = 2 heads of 16.
TowerFile qwen2_tower(DType dt, bool v25, std::vector<double> full = {1}) {
  TowerFile f;
  f.dt = dt;
  const int64_t D = 32, I = 48, O = 24, C = 3, T = 2, P = 2, W = 4 * D;
  f.spec.family = v25 ? "qwen2_5_vl" : "qwen2_vl";
  f.spec.dims = {{"hidden", D},      {"heads", 2},          {"head_dim", 16},          {"intermediate", I},
                 {"out_hidden", O},  {"in_channels", C},    {"temporal_patch_size", T}, {"patch_size", P},
                 {"merge_size", 2},  {"eps", 1e-6},          {"rope_theta", 10000},     {"window", v25 ? 2 : 0}};
  f.spec.lists = {{"fullatt_blocks", v25 ? full : std::vector<double>{}}};
  StageSpec* st = &f.stage("embed", "embed");
  f.add(*st, "patch_embed.proj.weight", {D, C * T * P * P});
  for (int l = 0; l < 2; ++l) {
    st = &f.stage("block." + std::to_string(l), "block", l);
    f.add(*st, "norm1.weight", {D}, 1.0f);
    f.add(*st, "norm2.weight", {D}, 1.0f);
    if (!v25) f.add(*st, "norm1.bias", {D}), f.add(*st, "norm2.bias", {D});
    f.add(*st, "attn.qkv.weight", {3 * D, D});
    f.add(*st, "attn.qkv.bias", {3 * D});
    f.add(*st, "attn.proj.weight", {D, D});
    f.add(*st, "attn.proj.bias", {D});
    for (const char* lin : v25 ? std::vector<const char*>{"mlp.gate_proj", "mlp.up_proj"} : std::vector<const char*>{"mlp.fc1"}) {
      f.add(*st, std::string(lin) + ".weight", {I, D});
      f.add(*st, std::string(lin) + ".bias", {I});
    }
    const std::string down = v25 ? "mlp.down_proj" : "mlp.fc2";
    f.add(*st, down + ".weight", {D, I});
    f.add(*st, down + ".bias", {D});
  }
  st = &f.stage("merged", "merger");
  f.add(*st, "ln_q.weight", {D}, 1.0f);
  if (!v25) f.add(*st, "ln_q.bias", {D});
  f.add(*st, "mlp.0.weight", {W, W});
  f.add(*st, "mlp.0.bias", {W});
  f.add(*st, "mlp.2.weight", {O, W});
  f.add(*st, "mlp.2.bias", {O});
  return f;
}

// Gemma 4 shaped: 2 blocks, pooler (standardised), projector. D 32 = 2 heads of 16.
TowerFile gemma_tower(DType dt) {
  TowerFile f;
  f.dt = dt;
  const int64_t D = 32, F = 40, O = 24, P = 2, rows = 16;
  f.spec.family = "gemma4";
  f.spec.dims = {{"hidden", D},     {"heads", 2},          {"head_dim", 16},   {"intermediate", F},
                 {"out_hidden", O}, {"patch_size", P},     {"pooling_kernel", 3}, {"pos_rows", rows},
                 {"eps", 1e-6},     {"rope_theta", 100},   {"standardize", 1}, {"patch_kernel_chw", 0}};
  StageSpec* st = &f.stage("embed", "embed");
  f.add(*st, "input_proj.weight", {D, 3 * P * P});
  f.add(*st, "position_embedding_table", {2, rows, D});
  for (int l = 0; l < 2; ++l) {
    st = &f.stage("block." + std::to_string(l), "block", l);
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
                          "post_feedforward_layernorm.weight"})
      f.add(*st, n, {D}, 1.0f);
    f.add(*st, "self_attn.q_proj.linear.weight", {D, D});
    f.add(*st, "self_attn.k_proj.linear.weight", {D, D});
    f.add(*st, "self_attn.v_proj.linear.weight", {D, D});
    f.add(*st, "self_attn.o_proj.linear.weight", {D, D});
    f.add(*st, "mlp.gate_proj.linear.weight", {F, D});
    f.add(*st, "mlp.up_proj.linear.weight", {F, D});
    f.add(*st, "mlp.down_proj.linear.weight", {D, F});
    f.add(*st, "self_attn.q_norm.weight", {16}, 1.0f);
    f.add(*st, "self_attn.k_norm.weight", {16}, 1.0f);
  }
  st = &f.stage("pooled", "pooler");
  f.add(*st, "std_bias", {D});
  f.add(*st, "std_scale", {D}, 1.0f);
  st = &f.stage("projected", "projector");
  f.add(*st, "embedding_projection.weight", {O, D});
  return f;
}

// Forwards everything to a CPU backend, counting the bytes alloc() hands out while they are live.
class CountingBackend final : public backend::Backend {
 public:
  std::unique_ptr<backend::Backend> in;
  uint64_t live = 0, peak = 0;
  std::map<backend::Buffer*, size_t> allocated;

  explicit CountingBackend(std::unique_ptr<backend::Backend> backend = cpu::make_cpu_backend(2)) : in(std::move(backend)) {}
  const char* name() const override { return in->name(); }
  const char* precision() const override { return in->precision(); }
  DType activation_dtype(backend::ActRange r) const override { return in->activation_dtype(r); }
  uint64_t workspace_bytes(const backend::Workload& w) const override { return in->workspace_bytes(w); }
  backend::Buffer* alloc(size_t bytes) override {
    live += bytes;
    peak = std::max(peak, live);
    backend::Buffer* b = in->alloc(bytes);
    allocated[b] = bytes;
    return b;
  }
  backend::Buffer* wrap_host(void* host, size_t bytes) override { return in->wrap_host(host, bytes); }
  bool pack_weight(backend::Tensor& w) override { return in->pack_weight(w); }
  void release(backend::Buffer* b) override {
    if (auto it = allocated.find(b); it != allocated.end()) {
      live -= it->second;
      allocated.erase(it);
    }
    in->release(b);
  }
  void upload(backend::Buffer* d, size_t o, const void* s, size_t n) override { in->upload(d, o, s, n); }
  void download(void* d, const backend::Tensor& s) override { in->download(d, s); }
  void linear(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& w, const backend::LinearArgs& a) override {
    in->linear(y, x, w, a);
  }
  void layer_norm(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& g, const backend::Tensor& b,
                  float eps) override {
    in->layer_norm(y, x, g, b, eps);
  }
  void rms_norm(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* w, int64_t g, float eps,
                const backend::Tensor* residual) override {
    in->rms_norm(y, x, w, g, eps, residual);
  }
  void add(const backend::Tensor& y, const backend::Tensor& a, const backend::Tensor& b) override { in->add(y, a, b); }
  void affine(const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* s, const backend::Tensor* m, float k,
              float shift) override {
    in->affine(y, x, s, m, k, shift);
  }
  void rope(const backend::Tensor& x, const backend::Tensor& c, const backend::Tensor& s, int64_t h, int64_t hd,
            int64_t sec, const backend::HeadNorm* norm) override {
    in->rope(x, c, s, h, hd, sec, norm);
  }
  void attention(const backend::Tensor& o, const backend::Tensor& q, const backend::Tensor& k, const backend::Tensor& v, int64_t h,
                 int64_t hd, float sc, const std::vector<backend::Segment>& seg, backend::AttnProducts p) override {
    in->attention(o, q, k, v, h, hd, sc, seg, p);
  }
  int64_t attention_query_block(backend::AttnProducts p) const override { return in->attention_query_block(p); }
  void gather_sum(const backend::Tensor& y, const backend::Tensor& t, backend::Buffer* l, int64_t taps, bool acc) override {
    in->gather_sum(y, t, l, taps, acc);
  }
  int64_t count_nonfinite(const backend::Tensor& x, int64_t* first) override { return in->count_nonfinite(x, first); }
  void submit(std::function<void()> done) override { in->submit(std::move(done)); }
  void finish() override { in->finish(); }
};

using Factory = std::unique_ptr<VisionModel> (*)(const TowerSpec&, backend::Backend&, WeightStore&, int64_t);

struct Run {
  EncodeOutput out;
  uint64_t predicted = 0, allocated = 0, workspace = 0;
};

// One encode on a fresh backend (so its workspace is this encode's alone), every stage kept.
// packed: the resident store lets the backend rearrange the linear weights at open, as the addon
// does (the other residencies hand linear() the file's layout, which it packs as it reads).
Run encode(TowerFile& f, Factory make, int64_t row_chunk, const PixelInput& in, bool packed,
           std::unique_ptr<backend::Backend> cpu_backend = cpu::make_cpu_backend(2)) {
  iotest::TempFile file(f.bytes);
  f.spec.files = {file.path};
  for (auto& st : f.spec.stages)
    for (auto& t : st.tensors) t.file = 0;
  CountingBackend backend(std::move(cpu_backend));
  auto store = make_resident_store(f.spec, backend);
  auto model = make(f.spec, backend, *store, row_chunk);
  if (packed) store->pack_linear_weights(model->linear_weight_roles());
  Run r;
  EncodeControl ctl;
  ctl.keep_stages = true;
  backend.live = backend.peak = 0;
  model->encode(in, ctl, r.out);
  r.allocated = backend.peak;
  if (std::string(backend.in->name()) == "cpu") r.workspace = cpu::held_workspace_bytes(*backend.in);  // another backend's is its own
  r.predicted = model->scratch_bytes(in.rows);
  return r;
}

bool same_bits(const tessera::HostFloats& a, const tessera::HostFloats& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_same_outputs(const Run& whole, const Run& chunked) {
  EXPECT(whole.out.stages.size() == chunked.out.stages.size());
  for (size_t i = 0; i < whole.out.stages.size(); ++i)
    EXPECT_MSG(same_bits(whole.out.stages[i].data, chunked.out.stages[i].data),
               "stage " << whole.out.stages[i].name << " differs between one chunk and several");
  EXPECT(same_bits(whole.out.embeddings, chunked.out.embeddings));
  EXPECT(whole.out.deepstack.size() == chunked.out.deepstack.size());
  for (size_t i = 0; i < whole.out.deepstack.size(); ++i)
    EXPECT(same_bits(whole.out.deepstack[i], chunked.out.deepstack[i]));
}

// Weight dtypes x whether the resident store let the backend pack the linear weights at open.
const std::pair<DType, bool> kVariants[] = {{DType::F32, false}, {DType::F32, true}, {DType::BF16, false}, {DType::BF16, true}};

std::vector<float> random_pixels(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(size_t(rows * cols));
  for (float& x : v) x = u(g);
  return v;
}

// A Qwen encode's input: the rows of `px` (`cols` values each) as the frames of `grids` (t, h, w).
PixelInput grid_input(const std::vector<float>& px, int64_t cols, std::vector<std::array<int64_t, 3>> grids) {
  PixelInput in;
  in.pixels = px.data();
  in.rows = int64_t(px.size()) / cols;
  in.cols = cols;
  in.grids = std::move(grids);
  return in;
}

}  // namespace

namespace tessera::modeltest {

ScratchUse gemma_scratch(std::unique_ptr<backend::Backend> inner, int64_t row_chunk) {
  std::vector<int32_t> pos;
  for (int y = 0; y < 9; ++y)
    for (int x = 0; x < 12; ++x) pos.insert(pos.end(), {x, y});
  const int64_t rows = int64_t(pos.size() / 2), cols = 3 * 2 * 2;
  std::vector<float> px = random_pixels(rows, cols, 11);
  PixelInput in;
  in.pixels = px.data();
  in.rows = rows;
  in.cols = cols;
  in.positions = pos.data();
  in.image_rows = {rows};
  TowerFile f = gemma_tower(DType::F32);
  const Run r = encode(f, make_model, row_chunk, in, false, std::move(inner));
  return {r.predicted, r.allocated};
}

ScratchUse qwen_scratch(std::unique_ptr<backend::Backend> inner, int64_t row_chunk) {
  const int64_t cols = 3 * 2 * 2 * 2;
  std::vector<float> px = random_pixels(8 * 12, cols, 7);
  TowerFile f = qwen_tower(DType::F32);
  const Run r = encode(f, make_model, row_chunk, grid_input(px, cols, {{1, 8, 12}}), false, std::move(inner));
  return {r.predicted, r.allocated};
}

}  // namespace tessera::modeltest

TEST("models: a Qwen encode in many row chunks equals one chunk bit for bit; scratch_bytes is what it allocates") {
  const int64_t cols = 3 * 2 * 2 * 2;
  // One image of 96 patches: 36-row chunks become 4 equal chunks of 24 (whole merge windows).
  // Two images (96 + 24 rows, two attention segments): 4 chunks of 32, 32, 32 and a ragged 24.
  for (auto grids : {std::vector<std::array<int64_t, 3>>{{1, 8, 12}},
                     std::vector<std::array<int64_t, 3>>{{1, 8, 12}, {1, 4, 6}}}) {
    int64_t rows = 0;
    for (auto g : grids) rows += g[0] * g[1] * g[2];
    std::vector<float> px = random_pixels(rows, cols, 7);
    const PixelInput in = grid_input(px, cols, grids);
    for (auto [dt, packed] : kVariants) {
      TowerFile f = qwen_tower(dt);
      Run whole = encode(f, make_model, kRowChunk, in, packed);
      Run chunked = encode(f, make_model, 36, in, packed);
      EXPECT(whole.out.stages.size() == 5 && whole.out.deepstack.size() == 1);
      expect_same_outputs(whole, chunked);
      for (const Run* r : {&whole, &chunked}) {
        // One segment: attention's workspace is for all the rows, as predicted. (The backend's
        // prediction is exact for f32 weights it packs as it reads; a bound otherwise.)
        if (grids.size() == 1 && dt == DType::F32 && !packed)
          EXPECT_MSG(r->predicted == r->allocated + r->workspace,
                     "predicted " << r->predicted << ", allocated " << r->allocated << " + workspace " << r->workspace);
        else
          EXPECT(r->predicted >= r->allocated + r->workspace);
      }
      EXPECT(chunked.allocated < whole.allocated);  // the chunk buffers shrink with the chunk
    }
  }
}

TEST("models: a Qwen2 encode in many row chunks equals one chunk bit for bit; scratch_bytes is what it allocates") {
  const int64_t cols = 3 * 2 * 2 * 2;
  // A 10 x 14 grid (5 x 7 merged tokens: windows of 2 x 2 leave a partial row and column) and a 4 x 6 one.
  const std::vector<std::array<int64_t, 3>> grids{{1, 10, 14}, {1, 4, 6}};
  const int64_t rows = 10 * 14 + 4 * 6;
  std::vector<float> px = random_pixels(rows, cols, 5);
  const PixelInput in = grid_input(px, cols, grids);
  for (bool v25 : {false, true})
    for (auto [dt, packed] : kVariants) {
      TowerFile f = qwen2_tower(dt, v25);
      Run whole = encode(f, make_model, kRowChunk, in, packed);
      Run chunked = encode(f, make_model, 36, in, packed);
      EXPECT(whole.out.stages.size() == 4 && whole.out.tokens == rows / 4);
      expect_same_outputs(whole, chunked);
      for (const Run* r : {&whole, &chunked}) EXPECT(r->predicted >= r->allocated + r->workspace);
    }
}

TEST("models: Qwen2.5-VL's windows: edge windows cut short, rows contiguous per window, and they change the result") {
  PixelInput in;
  in.grids = {{1, 14, 14}, {2, 4, 6}};  // 7 x 7 merged tokens in 4 x 4 windows; then two frames of 2 x 3
  const qwen2::WindowOrder o = qwen2::window_order(in, 2, 4);
  std::vector<int64_t> sizes;
  for (const backend::Segment& s : o.windows) sizes.push_back(s.length / 4);
  EXPECT((sizes == std::vector<int64_t>{16, 12, 12, 9, 6, 6}));
  // The first window is the top-left 4 x 4 merged tokens, row by row; the second starts at column 4.
  EXPECT(o.tokens[0] == 0 && o.tokens[3] == 3 && o.tokens[4] == 7 && o.tokens[15] == 24 && o.tokens[16] == 4);
  std::vector<int64_t> sorted = o.tokens;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT(sorted[i] == int64_t(i));  // a permutation
  EXPECT(o.rows.size() == o.tokens.size() * 4 && o.rows[5] == o.tokens[1] * 4 + 1);

  // Windowed blocks differ from the same tower attending over whole frames everywhere; block 1 attends
  // over whole frames in both, so only block 0's windows tell them apart.
  const int64_t cols = 3 * 2 * 2 * 2, rows = 10 * 14;
  std::vector<float> px = random_pixels(rows, cols, 9);
  const PixelInput one = grid_input(px, cols, {{1, 10, 14}});
  TowerFile windowed = qwen2_tower(DType::F32, true), full = qwen2_tower(DType::F32, true, {0, 1});
  Run a = encode(windowed, make_model, kRowChunk, one, false), b = encode(full, make_model, kRowChunk, one, false);
  EXPECT(same_bits(a.out.stages[0].data, b.out.stages[0].data));     // embed
  EXPECT(!same_bits(a.out.stages[1].data, b.out.stages[1].data));    // block.0
}

TEST("models: a Gemma 4 encode in many row chunks equals one chunk bit for bit; scratch_bytes is what it allocates") {
  const int64_t cols = 3 * 2 * 2;
  // Image 0: a 12 x 9 patch grid; image 1: 6 x 6, behind two padding rows. 144 real rows in
  // 30-row chunks: 4 chunks of 29 and a ragged 28. Attention then runs chunks of query rows against
  // their image's keys (the op's one-segment form), the chunk of rows 87-115 as two calls, one per
  // image. The one-MLP-chunk run's attention phase is in halves here (96 + 48 rows, 96 + 12 for
  // one image: at this tower's sizes whole k and v outweigh the MLP chunk), itself a third split.
  for (bool two : {false, true}) {
    std::vector<int32_t> pos;
    std::vector<int64_t> image_rows;
    auto grid = [&](int w, int h) {
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) pos.insert(pos.end(), {x, y});
      image_rows.push_back(int64_t(w) * h);
    };
    grid(12, 9);
    if (two) {
      grid(6, 6);
      pos.insert(pos.end(), {-1, -1, -1, -1});
      image_rows.back() += 2;
    }
    const int64_t rows = int64_t(pos.size() / 2);
    std::vector<float> px = random_pixels(rows, cols, 11);
    PixelInput in;
    in.pixels = px.data();
    in.rows = rows;
    in.cols = cols;
    in.positions = pos.data();
    in.image_rows = image_rows;
    for (auto [dt, packed] : kVariants) {
      TowerFile f = gemma_tower(dt);
      Run whole = encode(f, make_model, kRowChunk, in, packed);
      Run chunked = encode(f, make_model, 30, in, packed);
      EXPECT(whole.out.stages.size() == 5 && whole.out.tokens == (two ? 16 : 12));
      expect_same_outputs(whole, chunked);
      for (const Run* r : {&whole, &chunked}) {
        if (!two && dt == DType::F32 && !packed)
          EXPECT_MSG(r->predicted == r->allocated + r->workspace,
                     "predicted " << r->predicted << ", allocated " << r->allocated << " + workspace " << r->workspace);
        else  // padding rows are counted in scratch_bytes(rows) but dropped before the encode
          EXPECT(r->predicted >= r->allocated + r->workspace);
      }
      EXPECT(chunked.allocated < whole.allocated);
    }
  }
}

// Precision 'bf16' on whole towers: every stage within a bound (max |diff| / max |ref|) of the same
// tower in f32, on every bf16 level this machine has (the x86 levels on an AMX host, BFMMLA under
// qemu). The bounds are HF's own bf16 errors against its fp32 (docs/bf16.md): Qwen, 9.2e-3, the least
// at the outputs of a full-size Qwen3-VL-8B-shaped tower on the suite's images (9.2e-3 to 1.57e-2,
// CPU and CUDA); Gemma 4, 2.4e-2, the
// least at a second block on the gemma4-tiny fixture's images (2.5e-2 to 2.0e-1 there; Gemma towers
// are ill-conditioned). The figures tessera measures are printed.
namespace {
constexpr double kQwenBf16Bound = 9.2e-3, kGemmaBf16Bound = 2.4e-2;

double rel_diff(const tessera::HostFloats& got, const tessera::HostFloats& ref) {
  double err = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(ref[i]));
    err = e > err || std::isnan(e) ? e : err;
    mx = std::max(mx, std::fabs(double(ref[i])));
  }
  return err / std::max(mx, 1e-30);
}

void expect_bf16_close(const Run& f32, const Run& bf, double bound, const char* what) {
  EXPECT(f32.out.stages.size() == bf.out.stages.size());
  for (size_t i = 0; i < f32.out.stages.size(); ++i) {
    const double d = rel_diff(bf.out.stages[i].data, f32.out.stages[i].data);
    std::printf("     %s: bf16 vs f32, stage %s: %.3g\n", what, f32.out.stages[i].name.c_str(), d);
    EXPECT_MSG(d <= bound, what << " stage " << f32.out.stages[i].name << ": " << d);
  }
  EXPECT(rel_diff(bf.out.embeddings, f32.out.embeddings) <= bound);
}
}  // namespace

TEST("models: Qwen, Qwen2 and Gemma 4 towers in precision bf16 stay within HF's own bf16 error of their f32 output, at every stage") {
  for (cpu::Simd level : cpu::supported_simd()) {
    if (!cpu::has_bf16(level)) continue;
    const std::string name = cpu::simd_name(level);
    {
      std::vector<float> px = random_pixels(120, 3 * 2 * 2 * 2, 7);
      const PixelInput in = grid_input(px, 3 * 2 * 2 * 2, {{1, 8, 12}, {1, 4, 6}});
      for (bool packed : {false, true}) {
        TowerFile f = qwen_tower(DType::BF16);
        Run ref = encode(f, make_model, kRowChunk, in, packed, cpu::make_cpu_backend(2, level, cpu::Precision::F32));
        Run bf = encode(f, make_model, kRowChunk, in, packed, cpu::make_cpu_backend(2, level, cpu::Precision::Bf16));
        expect_bf16_close(ref, bf, kQwenBf16Bound, (name + " qwen" + (packed ? " packed" : "")).c_str());
      }
    }
    {
      // Qwen2-VL and Qwen2.5-VL (windows, a full-attention block), held to the Qwen bound.
      std::vector<float> px = random_pixels(164, 3 * 2 * 2 * 2, 13);
      const PixelInput in = grid_input(px, 3 * 2 * 2 * 2, {{1, 10, 14}, {1, 4, 6}});
      for (bool v25 : {false, true}) {
        TowerFile f = qwen2_tower(DType::BF16, v25);
        Run ref = encode(f, make_model, kRowChunk, in, true, cpu::make_cpu_backend(2, level, cpu::Precision::F32));
        Run bf = encode(f, make_model, kRowChunk, in, true, cpu::make_cpu_backend(2, level, cpu::Precision::Bf16));
        expect_bf16_close(ref, bf, kQwenBf16Bound, (name + (v25 ? " qwen2.5-vl" : " qwen2-vl")).c_str());
      }
    }
    {
      std::vector<int32_t> pos;
      for (int y = 0; y < 9; ++y)
        for (int x = 0; x < 12; ++x) pos.insert(pos.end(), {x, y});
      std::vector<float> px = random_pixels(108, 3 * 2 * 2, 11);
      PixelInput in;
      in.pixels = px.data();
      in.rows = 108;
      in.cols = 3 * 2 * 2;
      in.positions = pos.data();
      in.image_rows = {108};
      TowerFile f = gemma_tower(DType::BF16);
      Run ref = encode(f, make_model, kRowChunk, in, true, cpu::make_cpu_backend(2, level, cpu::Precision::F32));
      Run bf = encode(f, make_model, kRowChunk, in, true, cpu::make_cpu_backend(2, level, cpu::Precision::Bf16));
      expect_bf16_close(ref, bf, kGemmaBf16Bound, (name + " gemma4").c_str());
    }
  }
}
