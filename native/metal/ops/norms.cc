// layer_norm and rms_norm (whole row, or per `group` columns: Gemma's per-head q/k/v norms; an optional residual
// added last: Gemma's post-norms).
#include <algorithm>

#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

// The kernels' weight-type codes (args.h) are DType's values: the ops here and in rope.cc pass
// uint32_t(tensor.dtype) as the kernel's weight_type.
static_assert(uint32_t(tessera::DType::F32) == ::kargs::kF32 && uint32_t(tessera::DType::F16) == ::kargs::kF16 &&
                  uint32_t(tessera::DType::BF16) == ::kargs::kBF16,
              "metal/shared/args.h's WeightType must equal native/common/dtype.h's DType");

namespace tessera::mtl {
using namespace detail;

// One simdgroup per 32 columns up to 8 (256 threads), fewer if the pipeline allows fewer (register
// pressure on a real GPU): the reduction order depends only on this count.
static uint32_t row_threads(Executor& ex, const Dispatch& d, int64_t cols) {
  const uint32_t want = 32u * uint32_t(std::clamp<int64_t>((cols + 31) / 32, 1, 8));
  return std::max(32u, std::min(want, ex.max_threads(*d.kernel) / 32 * 32));
}

// y: x's type, or f16 / bf16 from an f32 x (the residual stream, backend::ActRange::Stream, into a block's norm).
static void require_norm_out(const backend::Tensor& y, const backend::Tensor& x, const char* op) {
  require_act(y, op, "y");
  require(y.dtype == x.dtype || x.dtype == DType::F32, op,
          std::string("y is ") + dtype_name(y.dtype) + " but x is " + dtype_name(x.dtype) + " (y must be x's type, or reduced from an f32 x)");
}

static void require_vector(const backend::Tensor& t, int64_t n, const char* op, const char* name) {
  require_tensor(t, op, name);
  require(t.rows * t.cols == n && t.contiguous(), op, std::string(name) + " is " + shape(t) + ", expected [1, " + std::to_string(n) + "]");
}

void encode_layer_norm(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& gamma, const backend::Tensor& beta, float eps) {
  const char* op = "layer_norm";
  require_act(x, op, "x");
  require_norm_out(y, x, op);
  require_shape(y, x.rows, x.cols, op, "y");
  require_vector(gamma, x.cols, op, "gamma");
  require_vector(beta, x.cols, op, "beta");
  if (x.rows == 0 || x.cols == 0) return;
  kargs::Norm p{};
  p.rows = u32(x.rows, op, "rows");
  p.cols = p.group = u32(x.cols, op, "cols");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldy = u32(y.ld, op, "y.ld");
  p.has_weight = 1;
  p.weight_type = uint32_t(gamma.dtype);
  p.has_bias = 1;
  p.bias_type = uint32_t(beta.dtype);
  p.eps = eps;
  Dispatch d(act_kernel("norm_layer", x, y, op));
  d.bind(0, x, Access::Read);
  d.bind(1, y, Access::Write);
  d.bind(2, gamma, Access::Read);
  d.bind(3, beta, Access::Read);
  d.args(4, p);
  d.threads = {row_threads(ex, d, x.cols), 1, 1};
  d.groups = {p.rows, 1, 1};
  submit(ex, d);
}

void encode_rms_norm(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor* weight, int64_t group, float eps,
                     const backend::Tensor* residual) {
  const char* op = "rms_norm";
  require_act(x, op, "x");
  require_norm_out(y, x, op);
  require_shape(y, x.rows, x.cols, op, "y");
  require(group > 0 && x.cols % group == 0, op, "group " + std::to_string(group) + " does not divide the " + std::to_string(x.cols) + " columns");
  if (weight) require_vector(*weight, group, op, "weight");
  if (residual) {
    require_act_like(*residual, y, op, "residual");
    require_shape(*residual, x.rows, x.cols, op, "residual");
  }
  if (x.rows == 0 || x.cols == 0) return;
  kargs::Norm p{};
  p.rows = u32(x.rows, op, "rows");
  p.cols = u32(x.cols, op, "cols");
  p.group = u32(group, op, "group");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldy = u32(y.ld, op, "y.ld");
  p.has_weight = weight != nullptr;
  p.weight_type = weight ? uint32_t(weight->dtype) : 0;
  p.eps = eps;
  p.has_residual = residual != nullptr;
  p.ldr = residual ? u32(residual->ld, op, "residual.ld") : 0;
  const bool row = group == x.cols;
  require(row || y.dtype == x.dtype, op, std::string("a per-group norm's y must have x's type (") + dtype_name(x.dtype) + "), is " + dtype_name(y.dtype));
  Dispatch d(act_kernel(row ? "norm_rms_row" : "norm_rms_group", x, y, op));
  d.bind(0, x, Access::Read);
  d.bind(1, y, Access::Write);
  d.bind(2, weight ? *weight : x, Access::Read);  // placeholder when weightless: never read
  d.args(3, p);
  d.bind(4, residual ? *residual : x, Access::Read);  // likewise
  d.threads = {row ? row_threads(ex, d, x.cols) : row_threads(ex, d, (x.cols / group) * 32), 1, 1};
  d.groups = {p.rows, 1, 1};
  submit(ex, d);
}

}  // namespace tessera::mtl
