// Helpers of the encode functions: argument checks with messages that name the op and operand, and the
// final step every dispatch goes through (in-place detection, validate(), record).
#include <algorithm>
#include <limits>

#include "common/error.h"
#include "metal/ops.h"

namespace tessera::mtl::detail {

void bad_arg(const char* op, const std::string& what) { fail(Code::InvalidArgument, std::string(op) + " (metal): " + what); }
void require(bool cond, const char* op, const std::string& what) {
  if (!cond) bad_arg(op, what);
}
std::string shape(const backend::Tensor& t) { return "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "]"; }
void require_tensor(const backend::Tensor& t, const char* op, const char* name) {
  require(t.buf != nullptr, op, std::string(name) + " has no buffer");
  require(t.rows >= 0 && t.cols >= 0 && t.ld >= t.cols, op, std::string(name) + " has a bad shape " + shape(t) + " with ld " + std::to_string(t.ld));
}
void require_f32(const backend::Tensor& t, const char* op, const char* name) {
  require_tensor(t, op, name);
  require(t.dtype == DType::F32, op, std::string(name) + " must be f32, is " + dtype_name(t.dtype));
}
void require_act(const backend::Tensor& t, const char* op, const char* name) {
  require_tensor(t, op, name);
  require(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16, op,
          std::string(name) + " must be f32, f16 or bf16, is " + dtype_name(t.dtype));
}
void require_act_like(const backend::Tensor& t, const backend::Tensor& like, const char* op, const char* name) {
  require_act(t, op, name);
  require(t.dtype == like.dtype, op, std::string(name) + " is " + dtype_name(t.dtype) + " but the op's other activations are " + dtype_name(like.dtype));
}
const char* act_letter(DType t) { return t == DType::F16 ? "h" : t == DType::BF16 ? "b" : ""; }
std::string act_kernel(const char* base, const backend::Tensor& t) {
  const char* l = act_letter(t.dtype);
  return std::string(base) + (*l ? "_" : "") + l;
}
std::string act_kernel(const char* base, const backend::Tensor& x, const backend::Tensor& y, const char* op) {
  const std::string lx = act_letter(x.dtype), ly = act_letter(y.dtype);
  require(lx.empty() || ly.empty() || lx == ly, op, std::string("x is ") + dtype_name(x.dtype) + " but y is " + dtype_name(y.dtype));
  return std::string(base) + (lx.empty() && ly.empty() ? "" : lx.empty() ? "_f" + ly : ly.empty() ? "_" + lx + "f" : "_" + lx);
}
void require_shape(const backend::Tensor& t, int64_t rows, int64_t cols, const char* op, const char* name) {
  require(t.rows == rows && t.cols == cols, op,
          std::string(name) + " is " + shape(t) + ", expected [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
}
uint32_t u32(int64_t v, const char* op, const char* what) {
  require(v >= 0 && uint64_t(v) <= std::numeric_limits<uint32_t>::max(), op, std::string(what) + " out of range");
  return uint32_t(v);
}
uint32_t div_up(uint64_t a, uint64_t b) { return uint32_t((a + b - 1) / b); }

static bool overlaps(const BufferBinding& a, const BufferBinding& b) {
  return a.buf == b.buf && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

void submit(Executor& ex, Dispatch& d) {
  for (auto& w : d.buffers) {
    if (w.access != Access::Write) continue;
    for (auto& r : d.buffers)
      if (&r != &w && r.access != Access::Write && overlaps(w, r)) w.access = Access::ReadWrite;
  }
  const std::string err = validate(d, ex.limits(), ex.max_threads(*d.kernel));
  if (!err.empty()) fail(Code::Internal, "internal: " + err);
  ex.record(d);
}

}  // namespace tessera::mtl::detail
