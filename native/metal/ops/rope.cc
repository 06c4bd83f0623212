// rope: rotary embedding in place, `sections` equal parts per head (Qwen 1, Gemma 2).
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

void encode_rope(Executor& ex, const gpu::Tensor& x, const gpu::Tensor& cos, const gpu::Tensor& sin, int64_t heads, int64_t head_dim,
                 int64_t sections) {
  const char* op = "rope";
  require_f32(x, op, "x");
  require_f32(cos, op, "cos");
  require_f32(sin, op, "sin");
  require(heads > 0 && head_dim > 0 && sections > 0 && head_dim % (2 * sections) == 0, op,
          "head_dim " + std::to_string(head_dim) + " must split into " + std::to_string(sections) + " sections of even size");
  require(x.cols == heads * head_dim, op, "x is " + shape(x) + ", expected " + std::to_string(heads) + " heads of " + std::to_string(head_dim));
  require_shape(cos, x.rows, head_dim, op, "cos");
  require_shape(sin, x.rows, head_dim, op, "sin");
  require(cos.ld == sin.ld, op, "cos and sin must have the same row stride");
  if (x.rows == 0) return;
  kargs::Rope p{};
  p.rows = u32(x.rows, op, "rows");
  p.heads = u32(heads, op, "heads");
  p.head_dim = u32(head_dim, op, "head_dim");
  p.sections = u32(sections, op, "sections");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldc = u32(cos.ld, op, "cos.ld");
  Dispatch d("rope_apply");
  d.bind(0, x, Access::ReadWrite);
  d.bind(1, cos, Access::Read);
  d.bind(2, sin, Access::Read);
  d.args(3, p);
  d.threads = {64, 1, 1};
  d.groups = {div_up(uint64_t(heads) * uint64_t(head_dim / 2), 64), p.rows, 1};
  submit(ex, d);
}

}  // namespace tessera::mtl
