// What every tower implements: encode a batch of patch rows through all its stages, walking the
// weight store stage by stage, calling only the backend::Backend op set. One model file per family.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/aligned.h"
#include "backend/backend.h"
#include "io/tower_spec.h"
#include "io/weight_store.h"

namespace tessera {

// The tower's input: what HF's processor returns, for one or more images.
struct PixelInput {
  const float* pixels = nullptr;  // [rows, cols] row-major
  int64_t rows = 0, cols = 0;
  std::vector<std::array<int64_t, 3>> grids;  // Qwen: (t, h, w) per image, in patches
  const int32_t* positions = nullptr;        // Gemma: (x, y) per row
  std::vector<int64_t> image_rows;           // Gemma: rows per image
};

struct EncodeControl {
  bool keep_stages = false;   // return every stage's output
  bool check_finite = true;   // ERR_NUMERIC on inf/NaN in any stage output
  std::function<bool()> cancelled;                        // checked between stages → ERR_ABORTED
  std::function<void(int done, int total)> progress;      // after each stage
};

// An encode's host-side results: large ones mapped from the OS and returned to it when freed
// (common/aligned.h says why), so that encoding image after image does not grow the process.
using HostFloats = std::vector<float, PageAllocator<float>>;

// What a stage's output rows are: one per patch row (embed, blocks; Gemma's padding rows
// dropped) or one per output token (Qwen's mergers, Gemma's pooler and projector). Results of a
// batch are cut per image by it.
enum class RowKind { Patch, Token };
const char* row_kind_name(RowKind kind);  // "patch" | "token": the name the addon reports

struct StageOutput {
  std::string name;
  RowKind kind = RowKind::Patch;
  int64_t rows = 0, cols = 0;
  HostFloats data;
};

// What one encode of `patches` patch rows takes in and gives out, from the tower's own rules:
// what admission and batching plan with (TypeScript restates none of it).
struct Sizing {
  int64_t patch_width = 0;  // values per input row
  int64_t tokens = 0;       // output rows
  int64_t width = 0;        // values per output row
  uint64_t scratch_bytes = 0;
  uint64_t io_bytes = 0;    // the f32 input and output: 4 · (patches · patch_width + tokens · width)
};

struct EncodeOutput {
  HostFloats embeddings;  // [tokens, width]
  int64_t tokens = 0, width = 0;
  std::vector<HostFloats> deepstack;  // each [tokens, width] (Qwen3-VL)
  std::vector<StageOutput> stages;
};

class VisionModel {
 public:
  virtual ~VisionModel() = default;
  // Checks the input against the spec (ERR_INVALID_ARGUMENT naming what is wrong), then encodes.
  virtual void encode(const PixelInput& in, const EncodeControl& ctl, EncodeOutput& out) = 0;
  // Scratch bytes the encode of `rows` patch rows allocates: the same plan the allocator uses.
  virtual uint64_t scratch_bytes(int64_t rows) const = 0;
  // Values per input row (the patch-row width) and per output token, and the output tokens of
  // `patches` patch rows of whole images.
  virtual int64_t patch_width() const = 0;
  virtual int64_t out_width() const = 0;
  virtual int64_t tokens(int64_t patches) const = 0;
  Sizing sizing(int64_t patches) const;
  // The roles of the weights this tower only ever passes to linear(), in any stage: those a
  // store may let the backend rearrange (WeightStore::pack_linear_weights).
  virtual std::vector<std::string> linear_weight_roles() const = 0;
};

// Picks the family's tower from spec.family in the registry (models/registry.cc); an unknown family is
// ERR_MODEL_FORMAT. row_chunk: rows per chunk of the per-token work (kRowChunk; tests lower it to run
// many chunks on small inputs).
std::unique_ptr<VisionModel> make_model(const TowerSpec& spec, backend::Backend& backend, WeightStore& store,
                                        int64_t row_chunk);
std::unique_ptr<VisionModel> make_model(const TowerSpec& spec, backend::Backend& backend, WeightStore& store);

// Row chunking. Per-token work (norms, the MLP, projections into the residual stream) does not
// mix rows, so the towers run it over row chunks and size its scratch for one chunk: at 4,096
// patches the MLP's [rows, intermediate] activations alone would be 70 MB. Each output row's
// arithmetic is the same whatever the chunk (the kernels block only over rows and columns; a row's
// K accumulation order does not depend on the row count), so chunking changes no result bit.
// Chunks are not free (each linear call has a fixed cost), so they are as large as kRowChunk
// allows and equal in size; docs/cpu.md#row-chunks says why, docs/decisions/0009-row-chunks.md
// has the measurements behind the number.
constexpr int64_t kRowChunk = 3072;

// Rows per chunk for `rows` rows: the fewest chunks of at most max_chunk rows, of equal size (a
// short tail chunk would run the kernels below their efficient size), rounded up to `multiple`.
int64_t chunk_rows(int64_t rows, int64_t max_chunk, int64_t multiple = 1);

// Calls f(first_row, rows) for consecutive chunks of `chunk` rows (the last may be shorter)
// covering [0, rows).
template <class F>
void for_row_chunks(int64_t rows, int64_t chunk, F&& f) {
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) f(r0, std::min(chunk, rows - r0));
}

// The distinct chunk sizes for_row_chunks produces (the full chunk, then a shorter tail if any):
// what a model lists in its backend::Workload so the backend predicts its scratch for each.
std::vector<int64_t> chunk_sizes(int64_t rows, int64_t chunk);

// A backend buffer owned for one encode: finishes the device's work before releasing it, so an
// early exit (error, abort) never frees memory a queued kernel still reads.
class ScopedBuffer {
 public:
  ScopedBuffer(backend::Backend& backend, size_t bytes) : backend_(backend), buf_(backend.alloc(bytes)) {}
  ~ScopedBuffer() {
    backend_.finish();
    backend_.release(buf_);
  }
  ScopedBuffer(const ScopedBuffer&) = delete;
  ScopedBuffer& operator=(const ScopedBuffer&) = delete;
  backend::Buffer* get() const { return buf_; }

 private:
  backend::Backend& backend_;
  backend::Buffer* buf_;
};

// The pass every tower makes over its stages, in spec order: check for cancellation, acquire the
// stage's weights, run the tower's op for the stage's kind (which issues its ops and returns the
// stage's output), submit (the weights are released when the device completes), scan the output for
// inf/NaN, keep it if asked, hand deepstack and final outputs to `out`, report progress. A stage of a
// kind the tower has no op for, or a spec with no final stage, is ERR_MODEL_FORMAT.
enum class Emit { None, Deepstack, Embeddings };  // where a stage's output goes besides `stages`
struct StageResult {
  backend::Tensor out;
  RowKind kind;
  Emit emit = Emit::None;
  // The tower's row order when it is not the processor's: out's row i is processor row order[i]
  // (Qwen2.5-VL runs in window order). Downloads put the rows back in the processor's order.
  const std::vector<int64_t>* order = nullptr;
};
using StageOp = std::function<StageResult(const StageSpec&, const StageWeights&)>;
struct StageOps {
  const char* tower;                                      // for messages: "the Qwen tower"
  std::vector<std::pair<std::string, StageOp>> by_kind;   // StageSpec::kind → its op
};
void walk_stages(const TowerSpec& spec, backend::Backend& backend, WeightStore& store, const EncodeControl& ctl,
                 EncodeOutput& out, const StageOps& ops);

// Downloads a tensor into a StageOutput.
StageOutput download_stage(backend::Backend& backend, const backend::Tensor& t, const std::string& name,
                           RowKind kind = RowKind::Token, const std::vector<int64_t>* order = nullptr);

}  // namespace tessera
