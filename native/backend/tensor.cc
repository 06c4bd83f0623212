#include "common/error.h"
#include "backend/backend.h"

namespace tessera::backend {

void Backend::check_finite(const Tensor& x, const std::string& stage) {
  int64_t first = -1;
  const int64_t bad = count_nonfinite(x, &first);
  if (bad) fail_nonfinite(stage, bad, first, x.cols);
}

void fail_nonfinite(const std::string& stage, int64_t bad, int64_t first, int64_t cols) {
  fail(Code::Numeric, "stage '" + stage + "' produced " + std::to_string(bad) + " non-finite value(s); the first at token " +
                          std::to_string(first / cols) + ", channel " + std::to_string(first % cols));
}

Tensor make_tensor(Buffer* buf, size_t offset, DType dtype, int64_t rows, int64_t cols) {
  Tensor t;
  t.buf = buf;
  t.offset = offset;
  t.dtype = dtype;
  t.rows = rows;
  t.cols = cols;
  t.ld = cols;
  return t;
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.buf != b.buf || a.rows == 0 || b.rows == 0) return false;
  const size_t a1 = a.offset + (size_t(a.rows - 1) * size_t(a.ld) + size_t(a.cols)) * dtype_size(a.dtype);
  const size_t b1 = b.offset + (size_t(b.rows - 1) * size_t(b.ld) + size_t(b.cols)) * dtype_size(b.dtype);
  return a.offset < b1 && b.offset < a1;
}

Tensor Tensor::rows_view(int64_t r0, int64_t n) const {
  TESSERA_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows, "rows_view out of range");
  Tensor t = *this;
  t.offset += size_t(r0) * size_t(ld) * dtype_size(dtype);
  t.rows = n;
  return t;
}

Tensor Tensor::cols_view(int64_t c0, int64_t n) const {
  TESSERA_CHECK(c0 >= 0 && n >= 0 && c0 + n <= cols, "cols_view out of range");
  Tensor t = *this;
  t.offset += size_t(c0) * dtype_size(dtype);
  t.cols = n;
  return t;
}

Tensor Tensor::reshaped(int64_t new_cols) const {
  TESSERA_CHECK(contiguous() && new_cols > 0 && (rows * cols) % new_cols == 0, "reshape of a strided tensor");
  Tensor t = *this;
  t.rows = rows * cols / new_cols;
  t.cols = t.ld = new_cols;
  return t;
}

}  // namespace tessera::backend
