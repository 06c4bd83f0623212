// Where a stage's weights live while it computes. The three residencies of docs/design.md#residency implement
// this one interface: resident (read once at open), mapped (views into mmapped files) and stream
// (a ring of page-aligned slots filled by a prefetch thread). A model walks the stages in order:
// acquire(n) blocks until stage n is in memory and returns gpu tensors over it; release(n) is
// called from the backend's completion of the work that read it, and only then may the slot be
// reused.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/tower_spec.h"

namespace tessera {

class StageWeights {
 public:
  // The tensor with this role as a [rows, cols] view: 1-D tensors are [1, n]; N-D tensors are
  // [shape[0], product of the rest]. A missing role is ERR_TENSOR_MISSING.
  const backend::Tensor& get(const std::string& role) const;
  const backend::Tensor* find(const std::string& role) const;
  // The raw bytes of a tensor, for the few host-side reads (clamp scalars) a model needs.
  const void* host(const std::string& role) const;

  void set(const std::string& role, const backend::Tensor& t) { tensors_[role] = t; }
  void clear() { tensors_.clear(); }

 private:
  std::map<std::string, backend::Tensor> tensors_;
};

// Fills `out` with views of `stage`'s tensors living at `base` (the stage's bytes as laid out by
// stage_layout below) inside `buf`.
void bind_stage(const StageSpec& stage, backend::Buffer* buf, size_t base, StageWeights& out);
// The view of one tensor at `offset` in `buf`, by the [rows, cols] rule of StageWeights::get.
backend::Tensor tensor_view(const TensorSpec& t, backend::Buffer* buf, size_t offset);

// How a stage's tensors are laid out when copied into one slot. Tensors are grouped into runs:
// byte ranges of one file that hold several tensors back to back (gaps under 64 bytes, such as
// GGUF's alignment padding, are read along). A run is read with one pread and lands whole, so
// inside a run each tensor keeps its position relative to its neighbours; each run starts at a
// slot offset congruent to its file offset modulo 64. So a tensor has the same alignment in a
// slot as in its file (and in a mapping of it): all residencies hand kernels the same alignments.
// A packed folder's stage is one run. A quantised (Q8_0) tensor is a run of its own: its file
// bytes land at the end of the f32 extent it widens to, and read_run widens them in place, so a
// slot holds what the kernels read (f32) while the bytes read stay the file's. An assembled
// tensor (TensorSpec::pieces) is a run of its own too, 64-byte aligned: its pieces are read one
// after the other into it (then widened, if quantised). The one formula for slot bytes (used by
// the allocator and by TS's prediction through the addon).
struct StageRun {
  int file = 0;
  uint64_t file_offset = 0;  // absolute, in that file
  uint64_t length = 0;       // bytes read
  uint64_t slot_offset = 0;  // where the run's bytes land in the stage's memory
  // A quantised tensor's run: its stored type, its elements and where its f32 values start
  // (slot_offset + length == widened + 4 * elements). F32 (and elements 0) for a plain run.
  DType stored = DType::F32;
  uint64_t elements = 0;
  uint64_t widened = 0;
  // An assembled tensor's run: the ranges read back to back (length is their total); empty: one
  // range, [file_offset, file_offset + length).
  std::vector<ByteRange> pieces;
};
struct StageLayout {
  std::vector<uint64_t> offsets;  // per tensor, in spec order: where its (computed-type) values are
  std::vector<StageRun> runs;     // in file order
  uint64_t bytes = 0;
};
StageLayout stage_layout(const StageSpec& stage);

class FileSet;
// Reads one run into the stage memory `slot` (one pread per range) and, for a quantised tensor,
// widens it in place: what every store that reads files does with each run. Returns the preads.
uint64_t read_run(const FileSet& files, const StageRun& run, char* slot);
// Whether the mapped store must hold a tensor in memory of its own rather than view its file:
// a quantised tensor (computed widened) or an assembled one (its pieces are apart in the file).
bool held_apart(const TensorSpec& t);
// Bytes such a tensor takes in memory of the store's own (its computed-type values).
uint64_t held_bytes(const TensorSpec& t);
// Writes a held_apart tensor's computed-type values to `dst` from `file_base` (its file, mapped):
// pieces gathered in order, Q8_0 widened. Checks its length against its shape first.
void copy_held(const TensorSpec& t, const char* file_base, char* dst);
// Bytes of f32 a quantised tensor widens to (0 for the types used as stored).
uint64_t widened_bytes(const TensorSpec& t);
// The memory of its own the mapped store holds for a stage: its held_apart tensors, each at a
// 64-byte boundary; `offsets` (per tensor, spec order; unused for the rest) says where. The one
// formula for the store and for weight_memory.
uint64_t held_stage_bytes(const StageSpec& stage, std::vector<uint64_t>* offsets = nullptr);

struct WeightStoreStats {
  uint64_t bytes_read = 0;      // bytes read from files so far (pread / copies from mappings)
  uint64_t resident_bytes = 0;  // bytes of weights held in memory by the store itself
  uint64_t reads = 0;           // positional reads issued (one per run of stage_layout)
  uint64_t violations = 0;      // stream: slots handed out or refilled while still in use (must stay 0)
  uint64_t packed = 0;          // linear weights the backend rearranged in place (resident)
};

class WeightStore {
 public:
  virtual ~WeightStore() = default;
  virtual const char* residency() const = 0;
  // The model is about to walk every stage in order (a pass): streaming stores start prefetching.
  virtual void begin_pass() {}
  // The model's linear weights (by role): a store that keeps its weights in writable memory for
  // good (resident) lets the backend rearrange those in place, once (backend::Backend::pack_weight),
  // so that no encode repacks them. A mapping is read-only and a stream slot is refilled every
  // pass, so the others keep the file's layout and the backend packs as it reads.
  virtual void pack_linear_weights(const std::vector<std::string>& /*roles*/) {}
  virtual const StageWeights& acquire(size_t stage) = 0;
  virtual void release(size_t stage) = 0;
  // The pass is over and the backend has finished its work (finish() first): a stage acquired
  // but never released (an error between acquire and submit) is given back to the store.
  virtual void end_pass() {}
  virtual WeightStoreStats stats() const = 0;
};

}  // namespace tessera
