#include "models/arena.h"

#include "common/aligned.h"
#include "common/error.h"

namespace tessera {

void Arena::allocate(uint64_t scratch_bytes) {
  scratch_ = std::make_unique<ScopedBuffer>(*backend_, size_t(scratch_bytes));
}

backend::Tensor Arena::tensor(int64_t rows, int64_t cols, DType dtype) {
  const uint64_t offset = top_;
  top_ = round_up(top_ + uint64_t(rows) * uint64_t(cols) * dtype_size(dtype), 64);
  total_ = std::max(total_, top_);
  if (!scratch_) {
    backend::Tensor t;
    t.dtype = dtype, t.rows = rows, t.cols = cols, t.ld = cols;
    return t;
  }
  TESSERA_CHECK(top_ <= scratch_->get()->bytes || rows * cols == 0, "arena region past the measured scratch");
  return backend::make_tensor(scratch_->get(), size_t(offset), dtype, rows, cols);
}

backend::Buffer* Arena::buffer(uint64_t bytes) {
  buffers_bytes_ += bytes;
  if (!backend_) return nullptr;
  buffers_.push_back(std::make_unique<ScopedBuffer>(*backend_, size_t(bytes)));
  return buffers_.back()->get();
}

backend::Tensor view_as(const backend::Tensor& region, int64_t rows, int64_t cols) {
  TESSERA_CHECK(rows * cols <= region.rows * region.cols && region.contiguous(), "view larger than its region");
  backend::Tensor t = region;
  t.rows = rows, t.cols = cols, t.ld = cols;
  return t;
}

}  // namespace tessera
