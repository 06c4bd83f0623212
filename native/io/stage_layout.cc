#include <string>

#include "common/aligned.h"
#include "common/error.h"
#include "io/weight_store.h"

namespace tessera {

// 64 bytes: a cache line and the widest SIMD load, so kernels may use aligned loads of any row 0.
static constexpr uint64_t kTensorAlign = 64;

StageLayout stage_layout(const StageSpec& stage) {
  StageLayout l;
  l.offsets.reserve(stage.tensors.size());
  for (const auto& t : stage.tensors) {
    l.offsets.push_back(l.bytes);
    l.bytes = round_up(l.bytes + t.length, kTensorAlign);
  }
  return l;
}

static gpu::Tensor view_of(const TensorSpec& t, gpu::Buffer* buf, size_t offset) {
  int64_t rows = 1, cols = 1;
  if (t.shape.size() == 1) {
    cols = t.shape[0];
  } else if (!t.shape.empty()) {
    rows = t.shape[0];
    for (size_t i = 1; i < t.shape.size(); ++i) cols *= t.shape[i];
  }
  if (uint64_t(rows) * uint64_t(cols) * dtype_size(t.dtype) != t.length)
    fail(Code::WeightsCorrupt, "tensor '" + t.name + "': byte length " + std::to_string(t.length) +
                                   " does not match its shape and dtype");
  return gpu::make_tensor(buf, offset, t.dtype, rows, cols);
}

void bind_stage(const StageSpec& stage, gpu::Buffer* buf, size_t base, StageWeights& out) {
  out.clear();
  StageLayout l = stage_layout(stage);
  for (size_t i = 0; i < stage.tensors.size(); ++i)
    out.set(stage.tensors[i].role, view_of(stage.tensors[i], buf, base + l.offsets[i]));
}

const gpu::Tensor* StageWeights::find(const std::string& role) const {
  auto it = tensors_.find(role);
  return it == tensors_.end() ? nullptr : &it->second;
}

const gpu::Tensor& StageWeights::get(const std::string& role) const {
  auto it = tensors_.find(role);
  if (it == tensors_.end()) fail(Code::TensorMissing, "stage has no tensor with role '" + role + "'");
  return it->second;
}

const void* StageWeights::host(const std::string& role) const {
  const gpu::Tensor& t = get(role);
  TESSERA_CHECK(t.buf && t.buf->host, "weights are not host-visible");
  return static_cast<const char*>(t.buf->host) + t.offset;
}

}  // namespace tessera
