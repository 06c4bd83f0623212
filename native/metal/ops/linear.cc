// linear: y = act(clamp_out(clamp_in(x) · Wᵀ + bias)) + residual (gpu/backend.h). Kernel per weight type;
// the tiled simdgroup-matrix path, or the GEMV path when there are at most 4 rows (few tokens).
#include "common/error.h"
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

static constexpr int64_t kMatvecMaxRows = 4;  // the matvec kernel keeps this many accumulators per lane
static constexpr uint32_t kTile = 32;         // matmul.metal's TILE

void encode_linear(Executor& ex, const gpu::Tensor& y, const gpu::Tensor& x, const gpu::Tensor& w, const gpu::LinearArgs& a) {
  const char* op = "linear";
  require_f32(x, op, "x");
  require_f32(y, op, "y");
  require_tensor(w, op, "weight");
  require(w.contiguous(), op, "weight must be contiguous, is " + shape(w) + " with ld " + std::to_string(w.ld));
  require(w.cols == x.cols, op, "weight is " + shape(w) + " but x is " + shape(x) + " (weight is [out, in])");
  require_shape(y, x.rows, w.rows, op, "y");
  if (a.bias) {
    require_tensor(*a.bias, op, "bias");
    require(a.bias->rows * a.bias->cols == w.rows && a.bias->contiguous(), op, "bias is " + shape(*a.bias) + ", expected [1, " + std::to_string(w.rows) + "]");
  }
  if (a.residual) {
    require_f32(*a.residual, op, "residual");
    require_shape(*a.residual, y.rows, y.cols, op, "residual");
  }
  if (x.rows == 0 || w.rows == 0) return;
  kargs::Linear p{};
  p.rows = u32(x.rows, op, "rows");
  p.in = u32(x.cols, op, "in");
  p.out = u32(w.rows, op, "out");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldy = u32(y.ld, op, "y.ld");
  p.ldr = a.residual ? u32(a.residual->ld, op, "residual.ld") : 0;
  p.act = a.act == gpu::Act::GeluTanh ? kargs::kGeluTanh : a.act == gpu::Act::GeluErf ? kargs::kGeluErf : kargs::kCopy;
  p.has_bias = a.bias != nullptr;
  p.bias_type = a.bias ? uint32_t(a.bias->dtype) : 0;
  p.has_residual = a.residual != nullptr;
  p.in_min = a.in_min;
  p.in_max = a.in_max;
  p.out_min = a.out_min;
  p.out_max = a.out_max;
  const bool vec = x.rows <= kMatvecMaxRows;
  const char* suffix = w.dtype == DType::F16 ? "f16" : w.dtype == DType::BF16 ? "bf16" : "f32";
  Dispatch d(std::string(vec ? "matvec_" : "matmul_") + suffix);
  d.bind(0, x, Access::Read);
  d.bind(1, w, Access::Read);
  d.bind(2, a.bias ? *a.bias : x, Access::Read);          // placeholder when absent: never read
  d.bind(3, a.residual ? *a.residual : x, Access::Read);  // likewise
  d.bind(4, y, Access::Write);
  d.args(5, p);
  d.threads = {128, 1, 1};  // 4 simdgroups: the kernels' layout, not a tuning knob
  if (vec) d.groups = {div_up(p.out, 4), 1, 1};
  else d.groups = {div_up(p.out, kTile), div_up(p.rows, kTile), 1};
  if (ex.max_threads(*d.kernel) < 128)
    fail(Code::Gpu, std::string("pipeline ") + d.kernel->name + " allows only " + std::to_string(ex.max_threads(*d.kernel)) +
                        " threads per threadgroup; its layout needs 128");
  submit(ex, d);
}

}  // namespace tessera::mtl
