// rope: rotary embedding in place, `sections` equal parts per head (Qwen 1, Gemma 2); with a HeadNorm, each head
// RMS-normed first in the same pass (Gemma's q and k norms).
#include <algorithm>

#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

void encode_rope(Executor& ex, const backend::Tensor& x, const backend::Tensor& cos, const backend::Tensor& sin, int64_t heads, int64_t head_dim,
                 int64_t sections, const backend::HeadNorm* norm) {
  const char* op = "rope";
  require_act(x, op, "x");
  require_f32(cos, op, "cos");
  require_f32(sin, op, "sin");
  require(heads > 0 && head_dim > 0 && sections > 0 && head_dim % (2 * sections) == 0, op,
          "head_dim " + std::to_string(head_dim) + " must split into " + std::to_string(sections) + " sections of even size");
  require(x.cols == heads * head_dim, op, "x is " + shape(x) + ", expected " + std::to_string(heads) + " heads of " + std::to_string(head_dim));
  require_shape(cos, x.rows, head_dim, op, "cos");
  require_shape(sin, x.rows, head_dim, op, "sin");
  require(cos.ld == sin.ld, op, "cos and sin must have the same row stride");
  const backend::Tensor* nw = norm ? norm->weight : nullptr;
  if (nw) {
    require_tensor(*nw, op, "norm weight");
    require(nw->rows * nw->cols == head_dim && nw->contiguous(), op,
            "norm weight is " + shape(*nw) + ", expected [1, " + std::to_string(head_dim) + "]");
  }
  if (x.rows == 0) return;
  kargs::Rope p{};
  p.rows = u32(x.rows, op, "rows");
  p.heads = u32(heads, op, "heads");
  p.head_dim = u32(head_dim, op, "head_dim");
  p.sections = u32(sections, op, "sections");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldc = u32(cos.ld, op, "cos.ld");
  p.has_weight = nw != nullptr;
  p.weight_type = nw ? uint32_t(nw->dtype) : 0;
  p.eps = norm ? norm->eps : 0.0f;
  Dispatch d(act_kernel(norm ? "rope_norm" : "rope_apply", x));
  d.bind(0, x, Access::ReadWrite);
  d.bind(1, cos, Access::Read);
  d.bind(2, sin, Access::Read);
  d.args(3, p);
  if (norm) {
    d.bind(4, nw ? *nw : cos, Access::Read);  // placeholder when weightless: never read
    // one simdgroup per head, up to 8 (the norms' row_threads); the result does not depend on the count
    const uint32_t sgs = uint32_t(std::min<int64_t>(heads, 8));
    d.threads = {std::max(32u, std::min(32u * sgs, ex.max_threads(*d.kernel) / 32 * 32)), 1, 1};
    d.groups = {p.rows, 1, 1};
  } else {
    d.threads = {64, 1, 1};
    d.groups = {div_up(uint64_t(heads) * uint64_t(head_dim / 2), 64), p.rows, 1};
  }
  submit(ex, d);
}

}  // namespace tessera::mtl
