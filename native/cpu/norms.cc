// layer_norm() and rms_norm(): one row (or group) per pass, f32 accumulation.
#include <cmath>

#include "common/error.h"
#include "cpu/ops.h"

namespace tessera::cpu {

namespace {
void require_same_shape(const Tensor& y, const Tensor& x, const char* op) {
  require(y.rows == x.rows && y.cols == x.cols, op,
          "y is [" + std::to_string(y.rows) + ", " + std::to_string(y.cols) + "] but x is [" +
              std::to_string(x.rows) + ", " + std::to_string(x.cols) + "]");
  require(y.dtype == DType::F32, op, "y must be f32");
}
}  // namespace

// y = (x - mean) / sqrt(var + eps) * gamma + beta, var biased (divides by cols).
void layer_norm(Context& c, const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  const char* op = "layer_norm";
  require_tensor(y, op, "y");
  require_tensor(x, op, "x");
  require_same_shape(y, x, op);
  const int64_t n = x.cols;
  std::vector<float> g, b;
  vector_f32(gamma, n, op, "gamma", g);
  vector_f32(beta, n, op, "beta", b);
  if (n == 0) return;
  c.pool.parallel_for(size_t(x.rows), [&](size_t r0, size_t r1) {
    std::vector<float> tmp(static_cast<size_t>(n));
    for (size_t r = r0; r < r1; ++r) {
      const float* xr = row_f32(x, int64_t(r), tmp.data());
      c.k.layer_norm_row(y.host_ptr<float>(int64_t(r)), xr, n, g.data(), b.data(), eps);
    }
  }, 8);
}

// Per group of `group` columns: y = residual + x / sqrt(mean(x^2) + eps) * weight (weight as stored).
void rms_norm(Context& c, const Tensor& y, const Tensor& x, const Tensor* weight, int64_t group, float eps,
              const Tensor* residual) {
  const char* op = "rms_norm";
  require_tensor(y, op, "y");
  require_tensor(x, op, "x");
  require_same_shape(y, x, op);
  require(group > 0 && x.cols % group == 0, op,
          "group " + std::to_string(group) + " does not divide " + std::to_string(x.cols) + " columns");
  std::vector<float> w;
  if (weight) vector_f32(*weight, group, op, "weight", w);
  if (residual) {
    require_tensor(*residual, op, "residual");
    require(residual->dtype == DType::F32 && residual->rows == x.rows && residual->cols == x.cols, op,
            "residual must be f32 [" + std::to_string(x.rows) + ", " + std::to_string(x.cols) + "], is " +
                dtype_name(residual->dtype) + " [" + std::to_string(residual->rows) + ", " +
                std::to_string(residual->cols) + "]");
  }
  const int64_t n = x.cols;
  c.pool.parallel_for(size_t(x.rows), [&](size_t r0, size_t r1) {
    std::vector<float> tmp(static_cast<size_t>(n));
    for (size_t r = r0; r < r1; ++r) {
      const float* xr = row_f32(x, int64_t(r), tmp.data());
      c.k.rms_norm_row(y.host_ptr<float>(int64_t(r)), xr, n, group, w.empty() ? nullptr : w.data(),
                       residual ? residual->host_ptr<float>(int64_t(r)) : nullptr, eps);
    }
  }, 8);
}

}  // namespace tessera::cpu
