// add, affine: one thread per element, threadgroups of 64 x 1.
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

static void grid2d(Dispatch& d, uint32_t cols, uint32_t rows) {
  d.threads = {64, 1, 1};
  d.groups = {div_up(cols, 64), rows, 1};
}

void encode_add(Executor& ex, const backend::Tensor& y, const backend::Tensor& a, const backend::Tensor& b) {
  const char* op = "add";
  require_act(a, op, "a");
  require_act_like(b, a, op, "b");
  require_act_like(y, a, op, "y");
  require_shape(b, a.rows, a.cols, op, "b");
  require_shape(y, a.rows, a.cols, op, "y");
  if (a.rows == 0 || a.cols == 0) return;
  kargs::Binary p{};
  p.rows = u32(a.rows, op, "rows");
  p.cols = u32(a.cols, op, "cols");
  p.lda = u32(a.ld, op, "a.ld");
  p.ldb = u32(b.ld, op, "b.ld");
  p.ldy = u32(y.ld, op, "y.ld");
  Dispatch d(act_kernel("ew_binary", a));
  d.bind(0, a, Access::Read);
  d.bind(1, b, Access::Read);
  d.bind(2, y, Access::Write);
  d.args(3, p);
  grid2d(d, p.cols, p.rows);
  submit(ex, d);
}


void encode_affine(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* sub, const backend::Tensor* mul, float scale,
                   float shift) {
  const char* op = "affine";
  require_act(x, op, "x");
  require_act_like(y, x, op, "y");
  require_shape(y, x.rows, x.cols, op, "y");
  for (auto [t, name] : {std::pair{sub, "sub"}, std::pair{mul, "mul"}})
    if (t) {
      require_tensor(*t, op, name);
      require(t->rows * t->cols == x.cols && t->contiguous(), op, std::string(name) + " is " + shape(*t) + ", expected [1, " + std::to_string(x.cols) + "]");
    }
  if (x.rows == 0 || x.cols == 0) return;
  kargs::Affine p{};
  p.rows = u32(x.rows, op, "rows");
  p.cols = u32(x.cols, op, "cols");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldy = u32(y.ld, op, "y.ld");
  p.has_sub = sub != nullptr;
  p.sub_type = sub ? uint32_t(sub->dtype) : 0;
  p.has_mul = mul != nullptr;
  p.mul_type = mul ? uint32_t(mul->dtype) : 0;
  p.scale = scale;
  p.shift = shift;
  Dispatch d(act_kernel("ew_affine", x));
  d.bind(0, x, Access::Read);
  d.bind(1, y, Access::Write);
  d.bind(2, sub ? *sub : x, Access::Read);  // placeholders when absent: never read
  d.bind(3, mul ? *mul : x, Access::Read);
  d.args(4, p);
  grid2d(d, p.cols, p.rows);
  submit(ex, d);
}

}  // namespace tessera::mtl
