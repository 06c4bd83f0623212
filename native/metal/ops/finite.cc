// count_nonfinite: the finite check of a stage's output on the device (metal/finite.metal), one thread per
// element in threadgroups of 64 x 1; its two counters (count, first flat index) at `offset` in `counts`.
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

void encode_count_nonfinite(Executor& ex, const backend::Tensor& x, backend::Buffer* counts, uint64_t offset) {
  const char* op = "check_finite";
  require_act(x, op, "x");
  require(counts && offset + 8 <= counts->bytes, op, "the counter slot passes the end of its buffer");
  if (x.rows == 0 || x.cols == 0) return;
  kargs::Finite p{};
  p.rows = u32(x.rows, op, "rows");
  p.cols = u32(x.cols, op, "cols");
  p.ldx = u32(x.ld, op, "x.ld");
  u32(uint64_t(x.rows) * uint64_t(x.cols), op, "elements");  // the first bad value's flat index is a uint
  Dispatch d(act_kernel("count_nonfinite", x));
  d.bind(0, x, Access::Read);
  d.bind_raw(1, counts, offset, 8, Access::ReadWrite, 4);
  d.args(2, p);
  d.threads = {64, 1, 1};
  d.groups = {div_up(p.cols, 64), p.rows, 1};
  submit(ex, d);
}

}  // namespace tessera::mtl
