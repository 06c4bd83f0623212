// What the CPU backend's table tests share (test_cpu_*.cc): seeded random data, matrices in any dtype,
// a backend per SIMD level, the double-precision references and the checks built on them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "common/cpu_features.h"
#include "common/error.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#include "harness.h"

using tessera::DType;
using tessera::cpu::Simd;
using tessera::cpu::Precision;
using namespace tessera::backend;

namespace cpu_test {

struct Rng {
  std::mt19937 g;
  explicit Rng(uint32_t seed) : g(seed) {}
  float uniform(float lo = -1, float hi = 1) { return std::uniform_real_distribution<float>(lo, hi)(g); }
  int range(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }
};

// Rounds through the dtype so the reference sees exactly the values the kernel reads.
inline float through(DType t, float v) {
  if (t == DType::BF16) return tessera::bf16_to_f32(tessera::f32_to_bf16(v));
  if (t == DType::F16) return tessera::f16_to_f32(tessera::f32_to_f16(v));
  return v;
}

// A host matrix with its own values (as f32 after dtype rounding) and a backend tensor over it.
struct Mat {
  int64_t rows = 0, cols = 0, ld = 0;
  DType dtype = DType::F32;
  std::vector<float> v;  // [rows][cols], the values the backend sees
  Buffer* buf = nullptr;
  Tensor t;
  double at(int64_t r, int64_t c) const { return v[size_t(r * cols + c)]; }
};

struct Env {
  std::unique_ptr<Backend> b;
  Simd level;
  std::vector<Buffer*> bufs;
  Env(Simd l, int threads = 2) : b(tessera::cpu::make_cpu_backend(threads, l)), level(l) {}
  Env(std::unique_ptr<Backend> backend, Simd l) : b(std::move(backend)), level(l) {}
  ~Env() {
    for (Buffer* x : bufs) b->release(x);
  }
  // ld > cols gives a strided view; values uniform in [lo, hi).
  Mat make(Rng& rng, int64_t rows, int64_t cols, DType dt = DType::F32, int64_t pad = 0, float lo = -1, float hi = 1) {
    Mat m;
    m.rows = rows, m.cols = cols, m.ld = cols + pad, m.dtype = dt;
    m.v.resize(size_t(rows * cols));
    size_t es = tessera::dtype_size(dt);
    std::vector<char> host(size_t(std::max<int64_t>(rows * m.ld, 1)) * es, 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < m.ld; ++c) {
        float x = through(dt, rng.uniform(lo, hi));
        if (c < cols) m.v[size_t(r * cols + c)] = x;
        char* p = host.data() + size_t(r * m.ld + c) * es;
        if (dt == DType::F32) std::memcpy(p, &x, 4);
        else {
          uint16_t h = dt == DType::BF16 ? tessera::f32_to_bf16(x) : tessera::f32_to_f16(x);
          std::memcpy(p, &h, 2);
        }
      }
    m.buf = b->alloc(host.size());
    bufs.push_back(m.buf);
    b->upload(m.buf, 0, host.data(), host.size());
    m.t = make_tensor(m.buf, 0, dt, rows, m.ld).cols_view(0, cols);
    return m;
  }
  std::vector<float> read(const Tensor& t) {
    std::vector<float> out(size_t(t.rows * t.cols));
    b->download(out.data(), t);
    return out;
  }
};

// max |got - ref| / max(max |ref|, 1e-30) <= tol
inline void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  EXPECT_MSG(got.size() == ref.size(), what << ": size " << got.size() << " vs " << ref.size());
  double err = 0, mx = 0;
  size_t worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double e = std::fabs(double(got[i]) - ref[i]);
    if (!(e <= err)) err = e, worst = i;  // NaN counts as worst
    mx = std::max(mx, std::fabs(ref[i]));
  }
  EXPECT_MSG(err <= tol * std::max(mx, 1e-30),
             what << ": max err " << err << " at " << worst << " (got " << got[worst] << ", ref " << ref[worst]
                  << "), max |ref| " << mx);
}

inline double ref_act(Act a, double v) {
  switch (a) {
    case Act::None: return v;
    case Act::GeluTanh: return 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    case Act::GeluErf: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    // x · sigmoid(1.702 x) with 1.702 x rounded to f32 first, as torch (and the kernels) round it
    case Act::QuickGelu: return v / (1 + std::exp(-double(1.702f * float(v))));
    case Act::Silu: return v / (1 + std::exp(-v));
  }
  return v;
}

inline const char* dname(DType d) { return tessera::dtype_name(d); }

// y = x · wᵀ in double, [x.rows][w.rows]: the reference every linear case is held to.
inline std::vector<double> ref_linear(const Mat& x, const Mat& w) {
  std::vector<double> y(size_t(x.rows * w.rows));
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < w.rows; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < x.cols; ++i) acc += x.at(r, i) * w.at(c, i);
      y[size_t(r * w.rows + c)] = acc;
    }
  return y;
}

// Every f32 level (a bf16 level runs its base level's f32 kernels: the bf16 tests, test_cpu_bf16*.cc, cover it).
template <class F>
void each_level(F f) {
  for (Simd s : tessera::cpu::supported_simd())
    if (!tessera::cpu::has_bf16(s)) f(s);
}

inline bool runs(Simd level) {
  const std::vector<Simd> levels = tessera::cpu::supported_simd();
  return std::find(levels.begin(), levels.end(), level) != levels.end();
}

}  // namespace cpu_test

namespace cpu_test {
// softmax(q kᵀ scale) v per head within each segment, in double.
inline std::vector<double> ref_attention(const Mat& q, const Mat& k, const Mat& v, int64_t heads, int64_t hd, double scale,
                                  const std::vector<Segment>& segs, const std::vector<double>& init) {
  std::vector<double> out = init;
  const int64_t w = heads * hd;
  for (const Segment& s : segs)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = s.begin; i < s.begin + s.length; ++i) {
        std::vector<double> sc(size_t(s.length));
        double mx = -1e300;
        for (int64_t j = 0; j < s.length; ++j) {
          double d = 0;
          for (int64_t c = 0; c < hd; ++c) d += q.at(i, h * hd + c) * k.at(s.begin + j, h * hd + c);
          sc[size_t(j)] = d * scale;
          mx = std::max(mx, sc[size_t(j)]);
        }
        double sum = 0;
        for (auto& e : sc) sum += (e = std::exp(e - mx));
        for (int64_t c = 0; c < hd; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < s.length; ++j) acc += sc[size_t(j)] * v.at(s.begin + j, h * hd + c);
          out[size_t(i * w + h * hd + c)] = acc / sum;
        }
      }
  return out;
}
}  // namespace cpu_test

namespace cpu_test {
// The cross form: a chunk of query rows against all of one segment's keys gives those rows' bits
// (backend/backend.h), on env's backend, whatever its precision.
inline void expect_cross_form_bits(Env& env, const std::string& what) {
  Rng rng(77);
  const int64_t heads = 3, hd = 72, w = heads * hd, rows = 101;
  Mat qkv = env.make(rng, rows, 3 * w, DType::F32, 0, -2, 2), full = env.make(rng, rows, w);
  const Tensor q = qkv.t.cols_view(0, w), k = qkv.t.cols_view(w, w), v = qkv.t.cols_view(2 * w, w);
  env.b->attention(full.t, q, k, v, heads, hd, 0.2f, {{0, rows}});
  const std::vector<float> ref = env.read(full.t);
  for (int64_t r0 : {0, 13, 60}) {
    for (int64_t nq : {1, 17, 41}) {
      Mat part = env.make(rng, nq, w);
      env.b->attention(part.t, q.rows_view(r0, nq), k, v, heads, hd, 0.2f, {{0, rows}});
      const std::vector<float> got = env.read(part.t);
      EXPECT_MSG(std::memcmp(got.data(), ref.data() + r0 * w, got.size() * 4) == 0,
                 what << " rows " << r0 << "+" << nq);
    }
  }
}
}  // namespace cpu_test

namespace cpu_test {

inline std::vector<Simd> bf16_levels() {
  std::vector<Simd> out;
  for (Simd s : tessera::cpu::supported_simd())
    if (tessera::cpu::has_bf16(s)) out.push_back(s);
  return out;
}

}  // namespace cpu_test
