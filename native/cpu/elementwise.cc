// Row-parallel element-wise ops: add, affine, rope, gather_sum and the
// non-finite scan. Inputs of any dtype are widened row by row; outputs are f32.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>

#include "common/error.h"
#include "cpu/epilogue.h"
#include "cpu/ops.h"

namespace tessera::cpu {

namespace {

std::string shape(const Tensor& t) {
  std::string s = "[";
  s += std::to_string(t.rows);
  s += ", ";
  s += std::to_string(t.cols);
  s += "]";
  return s;
}

void require_out(const Tensor& y, const Tensor& x, const char* op, const char* xname) {
  require_tensor(y, op, "y");
  require_tensor(x, op, xname);
  require(y.dtype == DType::F32, op, "y must be f32");
  require(y.rows == x.rows && y.cols == x.cols, op, "y is " + shape(y) + " but " + xname + " is " + shape(x));
}

// Runs fn(r, tmp_a, tmp_b) for every row, rows split over the pool; tmp_* hold cols floats.
template <class Fn>
void for_rows(Context& c, int64_t rows, int64_t cols, Fn fn) {
  c.pool.parallel_for(size_t(rows), [&](size_t r0, size_t r1) {
    std::vector<float> ta(size_t(cols) + 1), tb(size_t(cols) + 1);
    for (size_t r = r0; r < r1; ++r) fn(int64_t(r), ta.data(), tb.data());
  }, size_t(std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1))));
}

// a (op) b with b either the same shape as y or one row broadcast over all rows.
template <class F>
void binary(Context& c, const char* op, const Tensor& y, const Tensor& a, const Tensor& b, F f) {
  require_out(y, a, op, "a");
  require_tensor(b, op, "b");
  require(b.cols == a.cols && (b.rows == a.rows || b.rows == 1), op,
          "b is " + shape(b) + ", expected " + shape(a) + " or [1, " + std::to_string(a.cols) + "]");
  const int64_t n = a.cols;
  for_rows(c, a.rows, n, [&](int64_t r, float* ta, float* tb) {
    const float* ar = row_f32(a, r, ta);
    const float* br = row_f32(b, b.rows == 1 ? 0 : r, tb);
    float* yr = y.host_ptr<float>(r);
    for (int64_t j = 0; j < n; ++j) yr[j] = f(ar[j], br[j]);
  });
}

}  // namespace

void add(Context& c, const Tensor& y, const Tensor& a, const Tensor& b) {
  binary(c, "add", y, a, b, [](float u, float v) { return u + v; });
}

void affine(Context& c, const Tensor& y, const Tensor& x, const Tensor* sub, const Tensor* mul, float scale,
            float shift) {
  const char* op = "affine";
  require_out(y, x, op, "x");
  const int64_t n = x.cols;
  std::vector<float> s, m;
  if (sub) vector_f32(*sub, n, op, "sub", s);
  if (mul) vector_f32(*mul, n, op, "mul", m);
  for_rows(c, x.rows, n, [&](int64_t r, float* ta, float*) {
    const float* xr = row_f32(x, r, ta);
    float* yr = y.host_ptr<float>(r);
    for (int64_t j = 0; j < n; ++j) {
      float v = xr[j] - shift;
      if (!s.empty()) v -= s[size_t(j)];
      if (!m.empty()) v *= m[size_t(j)];
      yr[j] = v * scale;
    }
  });
}

void rope(Context& c, const Tensor& x, const Tensor& cos, const Tensor& sin, int64_t heads, int64_t head_dim,
          int64_t sections, const backend::HeadNorm* norm) {
  const char* op = "rope";
  require_tensor(x, op, "x");
  require_tensor(cos, op, "cos");
  require_tensor(sin, op, "sin");
  require(x.dtype == DType::F32 && cos.dtype == DType::F32 && sin.dtype == DType::F32, op, "x, cos and sin must be f32");
  require(heads > 0 && head_dim > 0 && x.cols == heads * head_dim, op,
          "x is " + shape(x) + ", expected " + std::to_string(heads) + " heads of " + std::to_string(head_dim));
  require(sections > 0 && head_dim % (2 * sections) == 0, op,
          "head_dim " + std::to_string(head_dim) + " does not split into " + std::to_string(sections) +
              " sections of even size");
  for (const Tensor* t : {&cos, &sin})
    require(t->rows == x.rows && t->cols == head_dim, op,
            "cos/sin must be [" + std::to_string(x.rows) + ", " + std::to_string(head_dim) + "], found " + shape(*t));
  std::vector<float> nw;
  if (norm && norm->weight) vector_f32(*norm->weight, head_dim, op, "norm weight", nw);
  for_rows(c, x.rows, head_dim, [&](int64_t r, float*, float*) {
    c.k.rope_row(x.host_ptr<float>(r), cos.host_ptr<float>(r), sin.host_ptr<float>(r), heads, head_dim, sections,
                 norm != nullptr, nw.empty() ? nullptr : nw.data(), norm ? norm->eps : 0.0f);
  });
}

void gather_sum(Context& c, const Tensor& y, const Tensor& table, const void* lookup, size_t lookup_bytes,
                int64_t taps, bool accumulate) {
  const char* op = "gather_sum";
  require_tensor(y, op, "y");
  require_tensor(table, op, "table");
  require(y.dtype == DType::F32, op, "y must be f32");
  require(table.cols == y.cols, op, "table is " + shape(table) + " but y is " + shape(y));
  require(taps >= 0, op, "taps must be >= 0");
  const size_t entries = size_t(y.rows) * size_t(taps);
  require(lookup != nullptr && lookup_bytes >= entries * 8, op,
          "lookup buffer holds " + std::to_string(lookup_bytes) + " bytes, needs " + std::to_string(entries * 8) +
              " (int32 indices then f32 weights, [" + std::to_string(y.rows) + ", " + std::to_string(taps) + "])");
  const int32_t* index = static_cast<const int32_t*>(lookup);
  const float* weight = reinterpret_cast<const float*>(static_cast<const char*>(lookup) + entries * 4);
  for (size_t e = 0; e < entries; ++e)
    require(index[e] < table.rows, op,
            "index " + std::to_string(index[e]) + " (row " + std::to_string(e / size_t(std::max<int64_t>(taps, 1))) +
                ") is outside the table's " + std::to_string(table.rows) + " rows");
  const int64_t n = y.cols;
  for_rows(c, y.rows, n, [&](int64_t r, float* ta, float*) {
    float* yr = y.host_ptr<float>(r);
    if (!accumulate) std::fill(yr, yr + n, 0.0f);
    for (int64_t t = 0; t < taps; ++t) {
      const int32_t i = index[r * taps + t];
      if (i < 0) continue;
      const float w = weight[r * taps + t];
      const float* tr = row_f32(table, i, ta);
      for (int64_t j = 0; j < n; ++j) yr[j] += w * tr[j];
    }
  });
}

int64_t count_nonfinite(Context& c, const Tensor& x, int64_t* first) {
  const char* op = "count_nonfinite";
  require_tensor(x, op, "x");
  const int64_t n = x.cols;
  std::atomic<int64_t> count{0};
  std::mutex mu;
  int64_t first_flat = -1;
  for_rows(c, x.rows, n, [&](int64_t r, float* ta, float*) {
    const float* xr = row_f32(x, r, ta);
    // Exponent all ones = inf or NaN; counted branch-free so the compiler vectorises the scan.
    int64_t local = 0;
    for (int64_t j = 0; j < n; ++j) {
      uint32_t bits;
      std::memcpy(&bits, xr + j, 4);
      local += (bits & 0x7f800000u) == 0x7f800000u;
    }
    if (local) {
      int64_t j = 0;
      while (std::isfinite(xr[j])) ++j;
      count += local;
      std::lock_guard<std::mutex> lock(mu);
      if (first_flat < 0 || r * n + j < first_flat) first_flat = r * n + j;
    }
  });
  if (first) *first = first_flat;
  return count.load();
}

}  // namespace tessera::cpu
