#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/aligned.h"
#include "common/error.h"
#include "io/file_reader.h"
#include "io/weight_alignment.h"
#include "io/weight_store.h"

namespace tessera {

// Runs start at an offset congruent to their file offset modulo this, so a tensor's alignment in
// a slot is its alignment in the file.
static constexpr uint64_t kRunAlign = kTensorAlignment;
// Tensors of one file at most this far apart share a run: reading the gap costs less than a
// second pread (GGUF pads tensors to 32 bytes; safetensors and packed stages have no gaps).
static constexpr uint64_t kMaxGap = 64;

static uint64_t elements_of(const TensorSpec& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) n *= uint64_t(d);
  return n;
}

// The tensor's length must be what its shape takes in its stored type.
static void check_length(const TensorSpec& t) {
  uint64_t want = 0;
  if (!dtype_bytes(t.dtype, elements_of(t), &want) || want != t.length)
    fail(Code::WeightsCorrupt, "tensor '" + t.name + "': byte length " + std::to_string(t.length) +
                                   " does not match its shape and dtype");
  // Gathered Q8_0 bytes are a Q8_0 tensor only if every piece is whole blocks.
  if (dtype_quantised(t.dtype))
    for (const ByteRange& r : t.pieces)
      if (r.length % kQ8_0BlockBytes)
        fail(Code::WeightsCorrupt, "tensor '" + t.name + "': a piece of " + std::to_string(r.length) +
                                       " bytes is not a whole number of Q8_0 blocks");
}

uint64_t widened_bytes(const TensorSpec& t) { return dtype_quantised(t.dtype) ? elements_of(t) * 4 : 0; }

StageLayout stage_layout(const StageSpec& stage) {
  StageLayout l;
  const size_t n = stage.tensors.size();
  l.offsets.assign(n, 0);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &x = stage.tensors[a], &y = stage.tensors[b];
    return x.file != y.file ? x.file < y.file : x.offset < y.offset;
  });
  for (size_t i : order) {
    const auto& t = stage.tensors[i];
    if (dtype_quantised(t.dtype)) {  // a run of its own, landing at the end of its f32 extent
      check_length(t);  // the in-place widening trusts it
      const uint64_t widened = round_up(l.bytes, kRunAlign), f32_bytes = widened_bytes(t);
      l.runs.push_back({t.file, t.offset, t.length, widened + f32_bytes - t.length, t.dtype, f32_bytes / 4, widened, t.pieces});
      l.offsets[i] = widened;
      l.bytes = std::max(l.bytes, widened + f32_bytes);
      continue;
    }
    if (!t.pieces.empty()) {  // assembled: a run of its own, its pieces back to back
      check_length(t);
      const uint64_t at = round_up(l.bytes, kRunAlign);
      l.runs.push_back({t.file, t.offset, t.length, at, DType::F32, 0, 0, t.pieces});
      l.offsets[i] = at;
      l.bytes = at + t.length;
      continue;
    }
    StageRun* run = l.runs.empty() || l.runs.back().elements || !l.runs.back().pieces.empty() ? nullptr : &l.runs.back();
    // Sorted by offset, so t starts at or after the run's start; overlapping or duplicated
    // tensors simply become views into bytes the run already holds.
    if (!run || run->file != t.file || t.offset > run->file_offset + run->length + kMaxGap) {
      uint64_t at = round_up(l.bytes, kRunAlign) + t.offset % kRunAlign;
      l.runs.push_back({t.file, t.offset, 0, at});
      run = &l.runs.back();
    }
    uint64_t rel = t.offset - run->file_offset;
    run->length = std::max(run->length, rel + t.length);
    l.offsets[i] = run->slot_offset + rel;
    l.bytes = std::max(l.bytes, run->slot_offset + run->length);
  }
  return l;
}

bool held_apart(const TensorSpec& t) { return dtype_quantised(t.dtype) || !t.pieces.empty(); }

uint64_t held_bytes(const TensorSpec& t) { return dtype_quantised(t.dtype) ? widened_bytes(t) : t.length; }

uint64_t held_stage_bytes(const StageSpec& stage, std::vector<uint64_t>* offsets) {
  uint64_t bytes = 0;
  if (offsets) offsets->assign(stage.tensors.size(), 0);
  for (size_t i = 0; i < stage.tensors.size(); ++i) {
    const TensorSpec& t = stage.tensors[i];
    if (!held_apart(t)) continue;
    bytes = round_up(bytes, kRunAlign);
    if (offsets) (*offsets)[i] = bytes;
    bytes += held_bytes(t);
  }
  return bytes;
}

uint64_t read_run(const FileSet& files, const StageRun& run, char* slot) {
  uint64_t reads = 0;
  if (run.pieces.empty()) {
    files.read(run.file, run.file_offset, run.length, slot + run.slot_offset);
    reads = 1;
  } else {
    uint64_t at = run.slot_offset;
    for (const ByteRange& r : run.pieces) {
      files.read(run.file, r.offset, r.length, slot + at);
      at += r.length;
      ++reads;
    }
  }
  if (run.elements) widen_q8_0_in_place(reinterpret_cast<float*>(slot + run.widened), size_t(run.elements));
  return reads;
}

void copy_held(const TensorSpec& t, const char* file_base, char* dst) {
  check_length(t);
  for (const ByteRange& r : t.ranges()) {
    if (dtype_quantised(t.dtype)) {  // whole blocks (check_length): each piece widens on its own
      const uint64_t n = r.length / kQ8_0BlockBytes * kQ8_0Block;
      widen_to_f32(file_base + r.offset, t.dtype, reinterpret_cast<float*>(dst), size_t(n));
      dst += n * 4;
    } else {
      std::memcpy(dst, file_base + r.offset, size_t(r.length));
      dst += r.length;
    }
  }
}

backend::Tensor tensor_view(const TensorSpec& t, backend::Buffer* buf, size_t offset) {
  int64_t rows = 1, cols = 1;
  if (t.shape.size() == 1) {
    cols = t.shape[0];
  } else if (!t.shape.empty()) {
    rows = t.shape[0];
    for (size_t i = 1; i < t.shape.size(); ++i) cols *= t.shape[i];
  }
  check_length(t);
  return backend::make_tensor(buf, offset, dtype_computed(t.dtype), rows, cols);
}

void bind_stage(const StageSpec& stage, backend::Buffer* buf, size_t base, StageWeights& out) {
  out.clear();
  StageLayout l = stage_layout(stage);
  for (size_t i = 0; i < stage.tensors.size(); ++i)
    out.set(stage.tensors[i].role, tensor_view(stage.tensors[i], buf, base + l.offsets[i]));
}

const backend::Tensor* StageWeights::find(const std::string& role) const {
  auto it = tensors_.find(role);
  return it == tensors_.end() ? nullptr : &it->second;
}

const backend::Tensor& StageWeights::get(const std::string& role) const {
  auto it = tensors_.find(role);
  if (it == tensors_.end()) fail(Code::TensorMissing, "stage has no tensor with role '" + role + "'");
  return it->second;
}

const void* StageWeights::host(const std::string& role) const {
  const backend::Tensor& t = get(role);
  TESSERA_CHECK(t.buf && t.buf->host, "weights are not host-visible");
  return static_cast<const char*>(t.buf->host) + t.offset;
}

}  // namespace tessera
