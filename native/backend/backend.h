// The backend-neutral interface every tower is written against: buffers, 2D tensor views and a
// small op set (in the spirit of ggml). The CPU backend runs each op as it is issued; the Metal
// backend records them into one command buffer per stage and runs it on submit(). Models never
// know which backend they run on, and a backend never knows which model calls it.
//
// Conventions: activations are f32 row-major [rows, cols] with a row stride `ld` (elements), so a
// view can pick columns out of a wider tensor (q, k and v inside the fused qkv output). Weights
// keep their stored dtype (f32, f16, bf16) and are widened inside the kernels. Unless an op says
// otherwise, an output may alias its input (in-place) but not partially overlap it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace tessera::backend {

// Backend-owned memory: scratch it allocated, or host memory it wraps (weights in a slot, a
// mapping or a resident block). `host` is the CPU-visible address (null if none).
struct Buffer {
  void* host = nullptr;
  size_t bytes = 0;
  void* native = nullptr;  // backend-private handle (an MTLBuffer on Metal)
  virtual ~Buffer() = default;
};

struct Tensor {
  Buffer* buf = nullptr;
  size_t offset = 0;  // bytes from the start of buf
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, ld = 0;  // ld: elements between consecutive rows
  // A weight the backend rearranged in place (Backend::pack_weight): its panel height, else 0.
  // Such a tensor is only an operand of linear(), never a view to slice or read.
  int32_t panel = 0;

  bool contiguous() const { return ld == cols; }
  size_t elements() const { return size_t(rows) * size_t(cols); }
  // Only for backends with host-visible memory (CPU, tests): the address of element (r, c).
  template <class T>
  T* host_ptr(int64_t r = 0, int64_t c = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(buf->host) + offset +
                                (size_t(r) * size_t(ld) + size_t(c)) * dtype_size(dtype));
  }
  Tensor rows_view(int64_t r0, int64_t n) const;  // rows [r0, r0+n)
  Tensor cols_view(int64_t c0, int64_t n) const;  // cols [c0, c0+n), same rows
  // The same memory seen as [rows*cols/new_cols, new_cols]; needs a contiguous tensor.
  Tensor reshaped(int64_t new_cols) const;
};

Tensor make_tensor(Buffer* buf, size_t offset, DType dtype, int64_t rows, int64_t cols);

// Whether two tensors' byte spans (first element to last) in one buffer intersect: the aliasing rule's
// test (an output may alias an input exactly, never partially overlap it). Column views of one wider
// tensor interleave their spans, so they count as overlapping here; attention, which reads q, k and v
// side by side in qkv, tells those apart itself.
bool overlaps(const Tensor& a, const Tensor& b);

// The activation of linear()'s epilogue. QuickGelu is x · sigmoid(1.702 x), Silu x · sigmoid(x) (Qwen2-VL's MLP
// and Qwen2.5-VL's gated MLP, as HF computes them).
enum class Act { None, GeluTanh, GeluErf, QuickGelu, Silu };

// y = act(clamp_out(clamp_in(x) · Wᵀ + bias)) · mul + residual, evaluated in exactly that order
// (each step rounded to f32; absent steps skipped, not computed as · 1 or + 0). Weight W is [out, in]
// as stored in checkpoints. The clamps are Gemma 4's clippable linears (infinite bounds = no clamp).
// `mul` is the gated MLP's other branch: Gemma 4's GEGLU gelu(CL_gate(h)) ⊙ CL_up(h) runs as the up
// linear with mul = the gate linear's output, which saves the separate element-wise pass (f32
// multiplication commutes, so CL_up(h) · gate is HF's gate · CL_up(h) bit for bit).
struct LinearArgs {
  const Tensor* bias = nullptr;      // [1, out], any dtype
  Act act = Act::None;
  const Tensor* mul = nullptr;       // [rows, out] of y's type; may alias y
  const Tensor* residual = nullptr;  // [rows, out] of y's type; may alias y
  float in_min = -std::numeric_limits<float>::infinity();
  float in_max = std::numeric_limits<float>::infinity();
  float out_min = -std::numeric_limits<float>::infinity();
  float out_max = std::numeric_limits<float>::infinity();
};

// rope()'s optional first step: an RMS norm over each head (x_h / sqrt(mean(x_h²) + eps) · weight).
struct HeadNorm {
  const Tensor* weight = nullptr;  // [1, head_dim], any dtype; null: weightless
  float eps = 0;
};

// A run of rows that attend to each other (one image frame). Attention never crosses segments.
struct Segment {
  int64_t begin = 0, length = 0;
};

// What attention's products may compute in where the backend runs a reduced precision (precision()):
// Bf16 lets a backend use its reduced-precision attention (the CPU's bf16 on AMX; Metal's half K and V
// tiles in precision 'f16'); F32 keeps them f32, for a tower whose softmax is too sharp for bf16 scores
// (Gemma 4: q and k normed, scale 1). In f32 both are f32.
enum class AttnProducts { Bf16, F32 };

// A tower's declaration of the range an activation can reach, for activation_dtype(): Bounded fits half
// (|x| well under 65504, measured on the tower's checkpoints); Wide may leave it (a deep residual
// stream, an unclipped path) and stays f32 whatever the precision. Precise fits half's range but not its
// resolution: an op downstream amplifies half's rounding of it past the tower's budget (Gemma 4's q, k and
// v: RMS-normed and scaled by 1, their scores reach the tens and a sharp softmax turns a score's rounding
// into a probability's), so it stays f32 too. Stream is the residual stream of a deep tower, which every block
// adds its rounding to and every later stage inherits: inside half's range, but stored in half or bfloat it puts
// a tower at HF's own reduced-precision error rather than within it (a 27-block Qwen3-VL-8B-shaped tower in half,
// the fixture towers in bfloat: docs/metal.md#accuracy), so it stays f32 too.
enum class ActRange { Bounded, Wide, Precise, Stream };

// A description of the work a model will issue, for backends that keep scratch of their own
// (the CPU backend's packed weight strips and per-thread buffers) to predict it.
struct LinearShape {
  int64_t rows = 0, in = 0, out = 0;  // x [rows, in] · W[out, in]ᵀ
};
struct Workload {
  std::vector<LinearShape> linears;
  int64_t max_segment = 0, head_dim = 0;  // attention: longest segment (rows), head size
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // What the linears compute in: "f32", "bf16" (bf16 operands, f32 sums) where the backend was
  // asked for bf16 and has the units for it, or "f16" (half activations and tiles, f32 sums: Metal).
  // Never a reduced precision where f32 runs.
  virtual const char* precision() const { return "f32"; }
  // The type a tower stores an activation of `range` in between ops (the scratch tensors it makes):
  // F32, or F16 / BF16 on a backend that runs precision 'f16' / 'bf16' and a Bounded range. Rope tables, uploaded
  // pixels and gather weights stay f32 whatever this says; every op accepts F16 and BF16 activations where
  // this can return them, and download() widens them to f32.
  virtual DType activation_dtype(ActRange /*range*/ = ActRange::Bounded) const { return DType::F32; }

  // ---- memory
  // Bytes of its own scratch the backend holds at most after running `work` (beyond the buffers
  // it is asked for): part of every memory prediction. 0 for a backend that keeps none.
  virtual uint64_t workspace_bytes(const Workload& /*work*/) const { return 0; }
  virtual Buffer* alloc(size_t bytes) = 0;                      // scratch, uninitialised
  virtual Buffer* wrap_host(void* host, size_t bytes) = 0;      // zero-copy where possible; host outlives it
  virtual void release(Buffer* buf) = 0;
  // Copies host bytes into a buffer / out of it. download waits for all work issued so far.
  virtual void upload(Buffer* dst, size_t offset, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const Tensor& src) = 0;      // rows packed densely (cols per row); f16 as f32
  // Rearranges a linear weight [out, in] in place into the layout this backend's linear() reads
  // without repacking, and marks `w` so (w.panel). False, and w untouched, where the backend has
  // no such layout or w does not qualify. For weights that stay in writable memory across
  // encodes (the resident store), once, before any op reads them.
  virtual bool pack_weight(Tensor& /*w*/) { return false; }

  // ---- ops (outputs are f32, or f16 activations where activation_dtype() gives them)
  // linear's x and y may differ in type (f32 and f16 activations, either way round: a half x into an f32 y
  // where a tower keeps an output f32, an f32 x into a half y for the uploaded pixels); mul and residual have
  // y's type. Every other op takes its activations all of one type (gather_sum's table may be any type).
  virtual void linear(const Tensor& y, const Tensor& x, const Tensor& w, const LinearArgs& args) = 0;
  // The norms' y may be f16 / bf16 where x is f32 (the f32 residual stream into a block's norm output); their
  // residual has y's type.
  virtual void layer_norm(const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                          float eps) = 0;
  // RMS norm over each consecutive `group` columns of a row (group == cols: the whole row; group
  // == head_dim: per head), then the residual added: y = residual + (x / sqrt(mean(x²) + eps)) · weight,
  // in that order (each step rounded to f32; absent steps skipped). weight is [1, group] or null
  // (weightless); residual is [rows, cols] f32 or null, and may alias y (x may too). The residual is
  // Gemma 4's post-norms: `x += N_post(h)` in one pass instead of a norm and an add.
  virtual void rms_norm(const Tensor& y, const Tensor& x, const Tensor* weight, int64_t group, float eps,
                        const Tensor* residual) = 0;
  virtual void add(const Tensor& y, const Tensor& a, const Tensor& b) = 0;
  // y = ((x - shift - sub) * mul) * scale, sub/mul per column ([1, cols], either may be null),
  // shift and scale scalars (x - 0 is x, bit for bit).
  virtual void affine(const Tensor& y, const Tensor& x, const Tensor* sub, const Tensor* mul, float scale,
                      float shift) = 0;
  // Rotary embedding in place on x = [rows, heads*head_dim]; cos/sin are f32 [rows, head_dim].
  // Each head is split into `sections` equal parts (Qwen 1, Gemma 2 axes); within a part of size
  // s, lanes j and j+s/2 rotate together: x_j' = x_j cos_j - x_{j+s/2} sin_j,
  // x_{j+s/2}' = x_{j+s/2} cos_{j+s/2} + x_j sin_{j+s/2}.
  // With `norm`, each head is first RMS-normed (exactly rms_norm(x, x, norm->weight, head_dim, eps,
  // null), bit for bit on the CPU) and the normed values rotated: Gemma 4's q and k, rope(N_q(q)),
  // in one pass instead of two. The norm lives here rather than in rms_norm or a third op because
  // rope already is the in-place per-head op over x, and in every tower a per-head norm of q or k
  // is followed by it; its group is always rope's head, so only a weight and eps are new.
  virtual void rope(const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, int64_t head_dim,
                    int64_t sections, const HeadNorm* norm) = 0;
  // out = softmax(q kᵀ · scale) v per head and segment; q, k, v, out: [rows, heads*head_dim].
  // Tiled with an online softmax: memory O(rows * head_dim), never rows * rows. out may alias q
  // (the towers write it over q's columns of the qkv buffer); it must not overlap k or v.
  // q and out may instead have another row count than k and v ([nq, heads*head_dim]) when
  // `segments` is the single segment {0, k.rows}: every query row then attends to all of k and v
  // (a tower runs a chunk of one image's query rows against all that image's keys; a query row's
  // result does not depend on which other query rows share the call).
  virtual void attention(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                         int64_t head_dim, float scale, const std::vector<Segment>& segments,
                         AttnProducts products = AttnProducts::Bf16) = 0;
  // Query rows attention() works on together: a call whose query rows are not a multiple of it
  // computes part of a block for nothing, so a tower that cuts queries into chunks cuts them in
  // multiples of it. 1 for a backend with no such block.
  virtual int64_t attention_query_block(AttnProducts /*products*/ = AttnProducts::Bf16) const { return 1; }
  // y[r] (+)= Σ_t weights[r, t] · table[index[r, t]] for t < taps: position-table lookups
  // (bilinear taps, separable X/Y tables) and pooling. index is int32, weights f32, both
  // [rows(y), taps] in `lookup` (a Buffer filled with upload: index block, then weight block).
  // An index < 0 contributes nothing.
  virtual void gather_sum(const Tensor& y, const Tensor& table, Buffer* lookup, int64_t taps, bool accumulate) = 0;

  // Number of non-finite values in x; *first (if non-null) gets the first one's flat index.
  // Waits for the work issued so far.
  virtual int64_t count_nonfinite(const Tensor& x, int64_t* first) = 0;
  // The finite check of a stage's output (EncodeControl::check_finite): ERR_NUMERIC naming the stage, how
  // many values are not finite and where the first is (fail_nonfinite). This default counts at once
  // (count_nonfinite, a wait: the CPU, which runs each op as it is issued, has nothing to wait for). A backend
  // that batches work (Metal) counts on the device as part of the work issued so far and reports at its next
  // wait (download, finish), so the check adds no round trip of its own.
  virtual void check_finite(const Tensor& x, const std::string& stage);

  // ---- submission
  // Ends the current stage's recording and starts it. on_complete runs (on any thread) once the
  // device has finished every op issued before this call: it is where weight slots are released.
  virtual void submit(std::function<void()> on_complete) = 0;
  // Waits for everything submitted, and returns only after every on_complete of that work has run
  // (the weight stores rely on it to know their slots are free).
  virtual void finish() = 0;
};

// ERR_NUMERIC: `stage` produced `bad` non-finite values, the first at flat index `first` of a `cols`-wide output.
[[noreturn]] void fail_nonfinite(const std::string& stage, int64_t bad, int64_t first, int64_t cols);

}  // namespace tessera::backend
