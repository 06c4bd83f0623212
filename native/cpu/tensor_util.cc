#include <string>

#include "common/error.h"
#include "cpu/ops.h"

namespace tessera::cpu {

void require(bool cond, const char* op, const std::string& what) {
  if (!cond) fail(Code::InvalidArgument, std::string(op) + ": " + what);
}

void require_tensor(const Tensor& t, const char* op, const char* name) {
  std::string n(name);
  require(t.buf != nullptr && t.buf->host != nullptr, op, n + " has no host memory");
  require(t.rows >= 0 && t.cols >= 0 && t.ld >= t.cols, op,
          n + " has a bad shape [" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "] ld " +
              std::to_string(t.ld));
  if (t.rows == 0 || t.cols == 0) return;
  size_t end = t.offset + (size_t(t.rows - 1) * size_t(t.ld) + size_t(t.cols)) * dtype_size(t.dtype);
  require(end <= t.buf->bytes, op, n + " reaches past the end of its buffer (" + std::to_string(end) + " > " +
                                       std::to_string(t.buf->bytes) + " bytes)");
}

const float* row_f32(const Tensor& t, int64_t r, float* tmp) {
  if (t.dtype == DType::F32) return t.host_ptr<float>(r);
  widen_to_f32(t.host_ptr<uint16_t>(r), t.dtype, tmp, size_t(t.cols));
  return tmp;
}

void vector_f32(const Tensor& t, int64_t n, const char* op, const char* name, std::vector<float>& out) {
  require_tensor(t, op, name);
  require(t.rows == 1 && t.cols == n, op,
          std::string(name) + " must be [1, " + std::to_string(n) + "], found [" + std::to_string(t.rows) + ", " +
              std::to_string(t.cols) + "]");
  out.resize(size_t(n));
  widen_to_f32(static_cast<const char*>(t.buf->host) + t.offset, t.dtype, out.data(), size_t(n));
}

}  // namespace tessera::cpu
