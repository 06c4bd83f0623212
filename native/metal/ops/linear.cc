// linear: y = act(clamp_out(clamp_in(x) · Wᵀ + bias)) · mul + residual (backend/backend.h). Kernel per weight type;
// the tiled simdgroup-matrix path (kGemmBM x kGemmBN tiles, metal/shared/args.h), or the GEMV path when there
// are at most kMatvecMaxRows rows (few tokens).
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "common/error.h"
#include "metal/ops.h"
#include "tessera_kargs.h"  // metal/shared/args.h (build/metal, generated)

namespace tessera::mtl {
using namespace detail;

namespace {
// A clamp as the kernels take it (kargs::Linear): infinite bounds on both sides are no clamp at all, and a
// bound is never infinite (the kernels run under fast math, metal/kernel_common.h); ±FLT_MAX clamps every
// finite value to itself.
bool clamps(float lo, float hi) { return std::isfinite(lo) || std::isfinite(hi); }
float finite_bound(float b) {
  constexpr float kMax = std::numeric_limits<float>::max();
  return std::clamp(b, -kMax, kMax);
}
// The kernels' code for an activation (kargs::Activation).
uint32_t activation(backend::Act act) {
  switch (act) {
    case backend::Act::None: return kargs::kCopy;
    case backend::Act::GeluTanh: return kargs::kGeluTanh;
    case backend::Act::GeluErf: return kargs::kGeluErf;
    case backend::Act::QuickGelu: return kargs::kQuickGelu;
    case backend::Act::Silu: return kargs::kSilu;
  }
  fail(Code::InvalidArgument, "linear: unknown activation " + std::to_string(int(act)));
}
}  // namespace

void encode_linear(Executor& ex, const backend::Tensor& y, const backend::Tensor& x, const backend::Tensor& w, const backend::LinearArgs& a) {
  const char* op = "linear";
  require_act(x, op, "x");
  require_act(y, op, "y");
  require_tensor(w, op, "weight");
  require(w.contiguous(), op, "weight must be contiguous, is " + shape(w) + " with ld " + std::to_string(w.ld));
  require(w.cols == x.cols, op, "weight is " + shape(w) + " but x is " + shape(x) + " (weight is [out, in])");
  require_shape(y, x.rows, w.rows, op, "y");
  if (a.bias) {
    require_tensor(*a.bias, op, "bias");
    require(a.bias->rows * a.bias->cols == w.rows && a.bias->contiguous(), op, "bias is " + shape(*a.bias) + ", expected [1, " + std::to_string(w.rows) + "]");
  }
  for (const auto& [t, name] : {std::pair{a.mul, "mul"}, std::pair{a.residual, "residual"}})
    if (t) {
      require_act_like(*t, y, op, name);
      require_shape(*t, y.rows, y.cols, op, name);
    }
  if (x.rows == 0 || w.rows == 0) return;
  kargs::Linear p{};
  p.rows = u32(x.rows, op, "rows");
  p.in = u32(x.cols, op, "in");
  p.out = u32(w.rows, op, "out");
  p.ldx = u32(x.ld, op, "x.ld");
  p.ldy = u32(y.ld, op, "y.ld");
  p.ldr = a.residual ? u32(a.residual->ld, op, "residual.ld") : 0;
  p.act = activation(a.act);
  p.has_bias = a.bias != nullptr;
  p.bias_type = a.bias ? uint32_t(a.bias->dtype) : 0;
  p.has_residual = a.residual != nullptr;
  p.has_mul = a.mul != nullptr;
  p.ldm = a.mul ? u32(a.mul->ld, op, "mul.ld") : 0;
  p.in_min = finite_bound(a.in_min);
  p.in_max = finite_bound(a.in_max);
  p.out_min = finite_bound(a.out_min);
  p.out_max = finite_bound(a.out_max);
  p.has_in_clamp = clamps(a.in_min, a.in_max);
  p.has_out_clamp = clamps(a.out_min, a.out_max);
  const bool vec = x.rows <= int64_t(kargs::kMatvecMaxRows);
  const char* suffix = w.dtype == DType::F16 ? "f16" : w.dtype == DType::BF16 ? "bf16" : "f32";
  // precision 'f16' (metal/matmul.metal): _h half x into half y, _fh float x (the patch embedding's pixels) into
  // half y, _hf half x into float y (an output a tower keeps f32: backend::ActRange::Precise, Stream in 'bf16');
  // 'bf16' the same with b for h.
  Dispatch d(act_kernel((std::string(vec ? "matvec_" : "matmul_") + suffix).c_str(), x, y, op));
  d.bind(0, x, Access::Read);
  d.bind(1, w, Access::Read);
  d.bind(2, a.bias ? *a.bias : x, Access::Read);          // placeholder when absent: never read
  d.bind(3, a.residual ? *a.residual : x, Access::Read);  // likewise
  d.bind(4, y, Access::Write);
  d.args(5, p);
  d.bind(6, a.mul ? *a.mul : x, Access::Read);  // likewise
  const uint32_t nt = kargs::kGemmThreads;  // 4 simdgroups: the kernels' layout, not a tuning knob
  d.threads = {nt, 1, 1};
  if (vec) d.groups = {div_up(p.out, nt / 32), 1, 1};  // one output column per simdgroup
  else d.groups = {div_up(p.out, kargs::kGemmBN), div_up(p.rows, kargs::kGemmBM), 1};
  if (ex.max_threads(*d.kernel) < nt)
    fail(Code::Gpu, std::string("pipeline ") + d.kernel->name + " allows only " + std::to_string(ex.max_threads(*d.kernel)) +
                        " threads per threadgroup; its layout needs " + std::to_string(nt));
  submit(ex, d);
}

}  // namespace tessera::mtl
