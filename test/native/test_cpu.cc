// Table tests of the CPU backend: every op against plain double-precision loops, at odd sizes
// (ragged tails around the micro-kernel and block sizes), every weight dtype, strided views,
// aliasing, each activation and attention segments, on every SIMD level this machine runs.
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
using namespace tessera::backend;

namespace {

struct Rng {
  std::mt19937 g;
  explicit Rng(uint32_t seed) : g(seed) {}
  float uniform(float lo = -1, float hi = 1) { return std::uniform_real_distribution<float>(lo, hi)(g); }
  int range(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }
};

// Rounds through the dtype so the reference sees exactly the values the kernel reads.
float through(DType t, float v) {
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
void expect_close(const std::vector<float>& got, const std::vector<double>& ref, double tol, const std::string& what) {
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

double ref_act(Act a, double v) {
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

const char* dname(DType d) { return tessera::dtype_name(d); }

// y = x · wᵀ in double, [x.rows][w.rows]: the reference every linear case is held to.
std::vector<double> ref_linear(const Mat& x, const Mat& w) {
  std::vector<double> y(size_t(x.rows * w.rows));
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < w.rows; ++c) {
      double acc = 0;
      for (int64_t i = 0; i < x.cols; ++i) acc += x.at(r, i) * w.at(c, i);
      y[size_t(r * w.rows + c)] = acc;
    }
  return y;
}

// Every f32 level (a bf16 level runs its base level's f32 kernels: the bf16 tests below cover it).
template <class F>
void each_level(F f) {
  for (Simd s : tessera::cpu::supported_simd())
    if (!tessera::cpu::has_bf16(s)) f(s);
}

bool runs(Simd level) {
  const std::vector<Simd> levels = tessera::cpu::supported_simd();
  return std::find(levels.begin(), levels.end(), level) != levels.end();
}

}  // namespace

TEST("cpu: supported levels include scalar and the best one") {
  auto levels = tessera::cpu::supported_simd();
  EXPECT(!levels.empty() && levels.front() == Simd::Scalar);
  EXPECT(levels.back() == tessera::cpu::best_simd());
  EXPECT(std::string(tessera::cpu::make_cpu_backend(1)->name()) == "cpu");
}

TEST("cpu: linear matches a double loop (dtypes, ragged sizes, strides, bias, activations, mul, residual, clamps)") {
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {31, 33, 32}, {33, 31, 17}, {32, 32, 33}, {5, 300, 70}, {130, 40, 49}, {7, 517, 3}};
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(7);
    int variant = 0;
    for (const Shape& s : shapes)
      for (DType wd : {DType::F32, DType::F16, DType::BF16}) {
        ++variant;
        // shifted every 6 variants: each activation with and without bias, mul and residual
        const Act act = Act((variant + 3 * (variant / 6)) % 5);
        const bool with_bias = variant % 2 == 0, with_res = variant % 4 != 1, alias = variant % 4 == 2;
        const bool clamps = variant % 5 == 0;
        // the multiplier: in 2 of 3 variants, y itself in some (then also the residual where that aliases y)
        const bool with_mul = variant % 3 != 2, mul_alias = with_mul && variant % 4 >= 2;
        Mat x = env.make(rng, s.m, s.k, DType::F32, variant % 3);  // strided x for 2 of 3 variants
        Mat w = env.make(rng, s.n, s.k, wd, variant % 2);          // strided weight rows too
        Mat bias = env.make(rng, 1, s.n, wd);
        Mat y = env.make(rng, s.m, s.n, DType::F32, 3);  // y strided; its values are the residual / mul when aliased
        Mat res = alias ? y : env.make(rng, s.m, s.n);
        Rng mul_rng{uint32_t(variant)};  // its own stream: the other operands keep their values
        Mat mul = mul_alias ? y : env.make(mul_rng, s.m, s.n, DType::F32, variant % 2, 0.5f, 1.5f);
        LinearArgs a;
        a.act = act;
        if (with_bias) a.bias = &bias.t;
        if (with_mul) a.mul = &mul.t;
        if (with_res) a.residual = &res.t;
        if (clamps) a.in_min = -0.5f, a.in_max = 0.6f, a.out_min = -0.8f, a.out_max = 0.7f;
        std::vector<double> ref(size_t(s.m * s.n));
        for (int64_t r = 0; r < s.m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            double acc = 0;
            for (int64_t k = 0; k < s.k; ++k) {
              double xv = x.at(r, k);
              if (clamps) xv = std::min(std::max(xv, -0.5), 0.6000000238418579);
              acc += xv * w.at(c, k);
            }
            if (with_bias) acc += bias.at(0, c);
            if (clamps) acc = std::min(std::max(acc, -0.800000011920929), 0.699999988079071);
            acc = ref_act(act, acc);
            if (with_mul) acc *= mul.at(r, c);
            if (with_res) acc += res.at(r, c);
            ref[size_t(r * s.n + c)] = acc;
          }
        env.b->linear(y.t, x.t, w.t, a);
        // a multiplier up to 1.5 scales the accumulation's rounding error with it
        expect_close(env.read(y.t), ref, with_mul ? 3e-6 : 2e-6,
                     std::string(tessera::cpu::simd_name(level)) + " linear " + std::to_string(s.m) + "x" +
                         std::to_string(s.k) + "x" + std::to_string(s.n) + " " + dname(wd) + " variant " +
                         std::to_string(variant) + (with_mul ? (mul_alias ? " mul=y" : " mul") : ""));
      }
  });
}

TEST("cpu: QuickGELU and SiLU in linear's epilogue, per element against the double forms (every level, |x| to 100, bias, mul, residual)") {
  // The kernels' own inputs: edges (0, tiny, around e^-z's overflow at z ~ -88.4, ±90, ±100), then
  // a sweep; 331 values, so that the last vector is ragged at every width.
  std::vector<float> x = {0,     -0.0f,  1e-30f, -1e-30f, 1e-3f, -1e-3f, 0.5f,  -0.5f,  1,      -1,    5,    -5,
                          20,    -20,    50,     -50,     51.9f, -51.9f, 87,    -87,    88.3f,  -88.3f, 88.5f, -88.5f,
                          90,    -90,    100,    -100};
  Rng rng(21);
  while (x.size() < 231) x.push_back(rng.uniform(-10, 10));
  while (x.size() < 331) x.push_back(rng.uniform(-100, 100));
  const size_t n = x.size();
  std::vector<float> bias(n), mul(n), res(n), y(n);
  for (size_t i = 0; i < n; ++i) bias[i] = rng.uniform(), mul[i] = rng.uniform(0.5f, 1.5f), res[i] = rng.uniform();
  for (Simd level : tessera::cpu::supported_simd())
    for (Act act : {Act::QuickGelu, Act::Silu})
      for (int with = 0; with < 8; ++with) {  // bit 0: bias, 1: mul, 2: residual
        tessera::cpu::Epilogue e;
        e.act = act;
        tessera::cpu::kernels_for(level).epilogue(y.data(), x.data(), int64_t(n), with & 1 ? bias.data() : nullptr,
                                                  with & 2 ? mul.data() : nullptr, with & 4 ? res.data() : nullptr, e);
        for (size_t i = 0; i < n; ++i) {
          const float v = with & 1 ? x[i] + bias[i] : x[i];  // the sum the kernel activates, rounded as it rounds it
          const double t = ref_act(act, v) * (with & 2 ? mul[i] : 1.0), ref = t + (with & 4 ? res[i] : 0.0);
          // the activation within 4e-7 (a few ulp), then one rounding each for mul and residual; results
          // below 1e-36 may be 0 (e^-z overflows f32 there, as in torch)
          const double bound = 4e-7 * std::fabs(t) + std::ldexp(std::fabs(t) + std::fabs(ref), -24) + 1e-36;
          EXPECT_MSG(std::fabs(double(y[i]) - ref) <= bound,
                     tessera::cpu::simd_name(level) << (act == Act::Silu ? " silu" : " quick_gelu") << " with " << with
                                                    << ": x " << x[i] << " gives " << y[i] << ", reference " << ref
                                                    << " (error " << std::fabs(double(y[i]) - ref) / std::max(std::fabs(t), 1e-300)
                                                    << " of the activation)");
        }
      }
}

TEST("cpu: linear spanning several weight strips, and y aliasing x") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(11);
    // K * N above the packed-strip budget (2 Mi floats): the weight is packed in two strips.
    const int64_t m = 3, k = 1501, n = 2100;
    Mat x = env.make(rng, m, k), w = env.make(rng, n, k, DType::BF16), y = env.make(rng, m, n);
    const std::vector<double> ref = ref_linear(x, w);
    env.b->linear(y.t, x.t, w.t, LinearArgs{});
    expect_close(env.read(y.t), ref, 2e-6, std::string(tessera::cpu::simd_name(level)) + " two strips");

    // In place: y = x · Wᵀ over the same memory (square weight).
    Mat xy = env.make(rng, 37, 45), w2 = env.make(rng, 45, 45, DType::F16);
    std::vector<double> ref2(37 * 45);
    for (int64_t r = 0; r < 37; ++r)
      for (int64_t c = 0; c < 45; ++c) {
        double acc = 0;
        for (int64_t i = 0; i < 45; ++i) acc += xy.at(r, i) * w2.at(c, i);
        ref2[size_t(r * 45 + c)] = acc;
      }
    env.b->linear(xy.t, xy.t, w2.t, LinearArgs{});
    expect_close(env.read(xy.t), ref2, 2e-6, std::string(tessera::cpu::simd_name(level)) + " in place");
  });
}

TEST("cpu: pack_weight rearranges a weight in place; linear then gives the very same bits") {
  each_level([&](Simd level) {
    const int nr = tessera::cpu::kernels_for(level).nr;
    // (rows m, in k, out n, dtype): whole panels, a ragged last panel, fewer rows than a panel,
    // and a weight spanning several strips (k * n above the strip budget) with a ragged K block:
    // with a ragged last panel (its strip packed per call, alone), and with whole panels only (all
    // strips read in place, their items, of two chunk widths, from one counter on 2 threads).
    struct Case {
      int64_t m, k, n;
      DType dt;
    };
    for (const Case& c : {Case{7, 40, 3 * nr, DType::F32}, Case{13, 300, 2 * nr + 5, DType::BF16},
                          Case{5, 33, nr - 1, DType::F16}, Case{3, 1501, 2100, DType::BF16},
                          Case{200, 1501, 2112 / nr * nr, DType::BF16},
                          Case{30, 17, nr + 1, DType::F16}}) {
      Env env(level);
      Rng rng(uint32_t(c.k * 131 + c.n));
      Mat x = env.make(rng, c.m, c.k), w = env.make(rng, c.n, c.k, c.dt), y = env.make(rng, c.m, c.n);
      Mat bias = env.make(rng, 1, c.n);
      LinearArgs a;
      a.bias = &bias.t;
      a.act = Act::GeluTanh;
      env.b->linear(y.t, x.t, w.t, a);
      const std::vector<float> before = env.read(y.t);
      const std::string what = std::string(tessera::cpu::simd_name(level)) + " " + std::to_string(c.m) + "x" +
                               std::to_string(c.k) + "x" + std::to_string(c.n) + " " + dname(c.dt);
      const size_t wbytes = size_t(c.n) * size_t(c.k) * tessera::dtype_size(c.dt);
      const std::vector<char> raw_before(w.t.host_ptr<char>(), w.t.host_ptr<char>() + wbytes);
      Tensor packed = w.t;
      const bool did = env.b->pack_weight(packed);
      EXPECT_MSG(did == (c.n >= nr), what << ": pack_weight returned " << did);
      EXPECT_MSG(packed.panel == (did ? nr : 0), what << ": panel " << packed.panel);
      // Packed: the bytes moved (in place, nothing beyond the weight); refused: untouched.
      const std::vector<char> raw_after(w.t.host_ptr<char>(), w.t.host_ptr<char>() + wbytes);
      EXPECT_MSG((raw_after != raw_before) == did, what << ": bytes " << (did ? "unchanged" : "changed"));
      EXPECT_MSG(!env.b->pack_weight(packed), what << ": packed twice");
      // y starts as NaN, so that a column the packed path skips cannot keep the first call's value.
      const std::vector<float> nan(size_t(y.t.rows * y.t.ld), std::nanf(""));
      env.b->upload(y.buf, 0, nan.data(), nan.size() * 4);
      env.b->linear(y.t, x.t, packed, a);
      const std::vector<float> after = env.read(y.t);
      EXPECT_MSG(std::memcmp(before.data(), after.data(), before.size() * 4) == 0, what << ": results differ");
    }
    // A strided view (ld > cols) is not rearranged.
    Env env(level);
    Rng rng(5);
    Mat w = env.make(rng, 2 * nr, 20, DType::BF16, 3);
    Tensor t = w.t;
    EXPECT(!env.b->pack_weight(t) && t.panel == 0);
  });
  // A weight packed for one kernel's panels is refused by a kernel with others.
  auto levels = tessera::cpu::supported_simd();
  for (Simd a : levels)
    for (Simd b : levels) {
      if (tessera::cpu::kernels_for(a).nr == tessera::cpu::kernels_for(b).nr) continue;
      Env ea(a), eb(b);
      Rng rng(9);
      Mat w = ea.make(rng, 64, 16), x = eb.make(rng, 2, 16), y = eb.make(rng, 2, 64);
      Tensor t = w.t;
      EXPECT(ea.b->pack_weight(t));
      Tensor foreign = eb.make(rng, 64, 16).t;  // t's packing on eb's memory: refused before any read
      foreign.panel = t.panel;
      bool threw = false;
      try {
        eb.b->linear(y.t, x.t, foreign, LinearArgs{});
      } catch (const tessera::Error& e) {
        threw = e.code() == tessera::Code::InvalidArgument && std::string(e.what()).find("panels") != std::string::npos;
      }
      EXPECT_MSG(threw, tessera::cpu::simd_name(a) << " weight into " << tessera::cpu::simd_name(b));
    }
}

TEST("cpu: linear rejects mismatched shapes with ERR_INVALID_ARGUMENT") {
  Env env(Simd::Scalar, 1);
  Rng rng(1);
  Mat x = env.make(rng, 4, 8), w = env.make(rng, 5, 7), y = env.make(rng, 4, 5);
  bool threw = false;
  try {
    env.b->linear(y.t, x.t, w.t, LinearArgs{});
  } catch (const tessera::Error& e) {
    threw = e.code() == tessera::Code::InvalidArgument && std::string(e.what()).find("linear") != std::string::npos;
  }
  EXPECT(threw);
  // a multiplier of the wrong shape, and one that partially overlaps y: named in the message
  Mat w2 = env.make(rng, 5, 8), small = env.make(rng, 4, 4), wide = env.make(rng, 5, 6);
  const Tensor shifted = wide.t.rows_view(1, 4).cols_view(1, 5);  // y = its rows 0..3, shifted by a row and a column
  const Tensor y2 = wide.t.rows_view(0, 4).cols_view(0, 5);
  for (const Tensor* bad : {static_cast<const Tensor*>(&small.t), &shifted}) {
    LinearArgs a;
    a.mul = bad;
    std::string msg;
    try {
      env.b->linear(bad == &shifted ? y2 : y.t, x.t, w2.t, a);
    } catch (const tessera::Error& e) {
      if (e.code() == tessera::Code::InvalidArgument) msg = e.what();
    }
    EXPECT_MSG(msg.find("mul") != std::string::npos, "linear with a bad mul: '" << msg << "'");
  }
}

namespace {
// softmax(q kᵀ scale) v per head within each segment, in double.
std::vector<double> ref_attention(const Mat& q, const Mat& k, const Mat& v, int64_t heads, int64_t hd, double scale,
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
}  // namespace

TEST("cpu: attention matches a double softmax per segment and head (head_dim 72, 64, 16, 5)") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(3);
    for (int64_t hd : {72, 64, 16, 5}) {
      const int64_t heads = hd == 5 ? 3 : 2, w = heads * hd, rows = 131;
      // q, k, v are column views of one fused qkv tensor, as a model produces them.
      Mat qkv = env.make(rng, rows, 3 * w, DType::F32, 0, -2, 2);
      auto view = [&](int part) {
        Mat m;
        m.rows = rows, m.cols = w;
        m.v.resize(size_t(rows * w));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < w; ++c) m.v[size_t(r * w + c)] = qkv.v[size_t(r * 3 * w + part * w + c)];
        m.t = qkv.t.cols_view(part * w, w);
        return m;
      };
      Mat q = view(0), k = view(1), v = view(2);
      Mat out = env.make(rng, rows, w, DType::F32, 1);
      std::vector<Segment> segs = {{0, 33}, {33, 64}, {97, 1}, {98, 31}};  // rows 129..130 in no segment
      std::vector<double> init(out.v.begin(), out.v.end());
      const double scale = 1 / std::sqrt(double(hd));
      auto ref = ref_attention(q, k, v, heads, hd, float(scale), segs, init);
      env.b->attention(out.t, q.t, k.t, v.t, heads, hd, float(scale), segs);
      expect_close(env.read(out.t), ref, 1e-5,
                   std::string(tessera::cpu::simd_name(level)) + " attention hd " + std::to_string(hd));
      // out aliasing q, one segment over everything (a 131-row frame), scale 1.
      std::vector<Segment> one = {{0, rows}};
      auto ref1 = ref_attention(q, k, v, heads, hd, 1.0, one, std::vector<double>(size_t(rows * w), 0));
      env.b->attention(q.t, q.t, k.t, v.t, heads, hd, 1.0f, one);
      expect_close(env.read(q.t), ref1, 1e-5,
                   std::string(tessera::cpu::simd_name(level)) + " attention in place hd " + std::to_string(hd));
    }
  });
}

TEST("cpu: layer_norm and rms_norm (whole row, per head, weightless, bf16 parameters)") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(5);
    for (int64_t cols : {1, 31, 32, 33, 1152}) {
      Mat x = env.make(rng, 9, cols, DType::F32, 2, -3, 5);
      Mat g = env.make(rng, 1, cols, DType::BF16), b = env.make(rng, 1, cols, DType::F16);
      Mat y = env.make(rng, 9, cols, DType::F32, 1);
      std::vector<double> ref(size_t(9 * cols));
      for (int64_t r = 0; r < 9; ++r) {
        double mean = 0, var = 0;
        for (int64_t c = 0; c < cols; ++c) mean += x.at(r, c);
        mean /= double(cols);
        for (int64_t c = 0; c < cols; ++c) var += (x.at(r, c) - mean) * (x.at(r, c) - mean);
        var /= double(cols);
        for (int64_t c = 0; c < cols; ++c)
          ref[size_t(r * cols + c)] = (x.at(r, c) - mean) / std::sqrt(var + 1e-6) * g.at(0, c) + b.at(0, c);
      }
      env.b->layer_norm(y.t, x.t, g.t, b.t, 1e-6f);
      expect_close(env.read(y.t), ref, 1e-5, std::string(tessera::cpu::simd_name(level)) + " layer_norm " +
                                                 std::to_string(cols));
      env.b->layer_norm(x.t, x.t, g.t, b.t, 1e-6f);  // in place
      expect_close(env.read(x.t), ref, 1e-5, "layer_norm in place");
    }
    for (int64_t group : {72, 64, 216}) {
      const int64_t cols = 216;
      Mat x = env.make(rng, 7, cols, DType::F32, 3, -2, 2);
      Mat wt = env.make(rng, 1, group, DType::BF16);
      for (bool weighted : {true, false}) {
        Mat y = env.make(rng, 7, cols);
        if (group == 64) continue;  // 64 does not divide 216: checked below
        std::vector<double> ref(size_t(7 * cols));
        for (int64_t r = 0; r < 7; ++r)
          for (int64_t g0 = 0; g0 < cols; g0 += group) {
            double ss = 0;
            for (int64_t j = 0; j < group; ++j) ss += x.at(r, g0 + j) * x.at(r, g0 + j);
            double rs = 1 / std::sqrt(ss / double(group) + 1e-6);
            for (int64_t j = 0; j < group; ++j)
              ref[size_t(r * cols + g0 + j)] = x.at(r, g0 + j) * rs * (weighted ? wt.at(0, j) : 1.0);
          }
        env.b->rms_norm(y.t, x.t, weighted ? &wt.t : nullptr, group, 1e-6f, nullptr);
        expect_close(env.read(y.t), ref, 1e-5, "rms_norm group " + std::to_string(group));
      }
    }
    Mat x = env.make(rng, 2, 216), y = env.make(rng, 2, 216);
    bool threw = false;
    try {
      env.b->rms_norm(y.t, x.t, nullptr, 64, 1e-6f, nullptr);
    } catch (const tessera::Error& e) {
      threw = e.code() == tessera::Code::InvalidArgument;
    }
    EXPECT(threw);
  });
}

TEST("cpu: rms_norm adding a residual (row and per-head groups; residual apart, = y, and y = x = residual) is norm then add, bit for bit") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(21);
    for (int64_t group : {216, 72, 8}) {
      const int64_t rows = 6, cols = 216;
      const std::string what = std::string(tessera::cpu::simd_name(level)) + " rms_norm+residual group " + std::to_string(group);
      Mat x = env.make(rng, rows, cols, DType::F32, 2, -2, 2), res = env.make(rng, rows, cols, DType::F32, 1, -3, 3);
      Mat wt = env.make(rng, 1, group, DType::BF16, 0, 0.5f, 1.5f);
      // residual + N(x)·w in double, per group of each row
      auto reference = [&](const Mat& xm, const Mat& rm) {
        std::vector<double> out(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t g0 = 0; g0 < cols; g0 += group) {
            double ss = 0;
            for (int64_t j = 0; j < group; ++j) ss += xm.at(r, g0 + j) * xm.at(r, g0 + j);
            const double rs = 1 / std::sqrt(ss / double(group) + 1e-6);
            for (int64_t j = 0; j < group; ++j)
              out[size_t(r * cols + g0 + j)] = rm.at(r, g0 + j) + xm.at(r, g0 + j) * rs * wt.at(0, j);
          }
        return out;
      };
      const std::vector<double> ref = reference(x, res);
      // the two ops it replaces: h = N(x); y = residual + h
      Mat h = env.make(rng, rows, cols), sum = env.make(rng, rows, cols);
      env.b->rms_norm(h.t, x.t, &wt.t, group, 1e-6f, nullptr);
      env.b->add(sum.t, res.t, h.t);
      const std::vector<float> unfused = env.read(sum.t);
      Mat y = env.make(rng, rows, cols, DType::F32, 3);
      env.b->rms_norm(y.t, x.t, &wt.t, group, 1e-6f, &res.t);
      const std::vector<float> got = env.read(y.t);
      expect_close(got, ref, 1e-5, what);
      EXPECT_MSG(std::memcmp(got.data(), unfused.data(), got.size() * 4) == 0, what << ": differs from rms_norm then add");
      env.b->rms_norm(res.t, x.t, &wt.t, group, 1e-6f, &res.t);  // residual = y: Gemma's x += N(h)
      EXPECT_MSG(env.read(res.t) == got, what << ": residual = y differs");
      Mat xyz = env.make(rng, rows, cols, DType::F32, 0, -2, 2);
      const std::vector<double> self = reference(xyz, xyz);
      env.b->rms_norm(xyz.t, xyz.t, &wt.t, group, 1e-6f, &xyz.t);  // y = x = residual
      expect_close(env.read(xyz.t), self, 1e-5, what + " in place");
    }
    Mat x = env.make(rng, 2, 16), y = env.make(rng, 2, 16), bad = env.make(rng, 2, 8);
    std::string msg;
    try {
      env.b->rms_norm(y.t, x.t, nullptr, 16, 1e-6f, &bad.t);
    } catch (const tessera::Error& e) {
      if (e.code() == tessera::Code::InvalidArgument) msg = e.what();
    }
    EXPECT_MSG(msg.find("residual") != std::string::npos, "rms_norm with a [2, 8] residual: '" << msg << "'");
  });
}

TEST("cpu: add, mul, affine") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(9);
    for (int64_t cols : {1, 31, 33, 100}) {
      const int64_t rows = 5;
      Mat x = env.make(rng, rows, cols, DType::F32, 1, -6, 6);
      Mat b = env.make(rng, rows, cols, DType::F32, 3), brow = env.make(rng, 1, cols, DType::BF16);
      Mat y = env.make(rng, rows, cols);
      std::vector<double> ra(size_t(rows * cols)), rb(ra.size()), rf(ra.size()), rs(ra.size());
      Mat sub = env.make(rng, 1, cols, DType::F16), mulv = env.make(rng, 1, cols);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          size_t i = size_t(r * cols + c);
          ra[i] = x.at(r, c) + b.at(r, c);
          rb[i] = x.at(r, c) + brow.at(0, c);
          rf[i] = float(float(x.at(r, c) - sub.at(0, c)) * float(mulv.at(0, c))) * 0.5f;
          rs[i] = float(float(float(x.at(r, c)) - 0.5f) * 2.0f);  // Gemma's 2·(pixel − 0.5), exactly
        }
      env.b->add(y.t, x.t, b.t);
      expect_close(env.read(y.t), ra, 1e-7, "add");
      env.b->add(y.t, x.t, brow.t);
      expect_close(env.read(y.t), rb, 1e-7, "add broadcast row");
      env.b->affine(y.t, x.t, &sub.t, &mulv.t, 0.5f, 0.0f);
      expect_close(env.read(y.t), rf, 1e-7, "affine");
      env.b->affine(y.t, x.t, nullptr, nullptr, 2.0f, 0.5f);
      expect_close(env.read(y.t), rs, 0, "affine, scalar shift");
    }
  });
}

TEST("cpu: rope with 1 and 2 sections") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(13);
    for (int64_t sections : {1, 2})
      for (int64_t hd : {72, 64, 16}) {
        const int64_t rows = 11, heads = 3, w = heads * hd;
        Mat x = env.make(rng, rows, w, DType::F32, 5);
        Mat cs = env.make(rng, rows, hd), sn = env.make(rng, rows, hd);
        std::vector<double> ref(size_t(rows * w));
        const int64_t s = hd / sections, half = s / 2;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t p = 0; p < sections; ++p)
              for (int64_t j = 0; j < half; ++j) {
                int64_t a = h * hd + p * s + j, b = a + half, ca = p * s + j, cb = ca + half;
                ref[size_t(r * w + a)] = x.at(r, a) * cs.at(r, ca) - x.at(r, b) * sn.at(r, ca);
                ref[size_t(r * w + b)] = x.at(r, b) * cs.at(r, cb) + x.at(r, a) * sn.at(r, cb);
              }
        env.b->rope(x.t, cs.t, sn.t, heads, hd, sections, nullptr);
        expect_close(env.read(x.t), ref, 1e-6, "rope sections " + std::to_string(sections) + " hd " + std::to_string(hd));
      }
  });
}

TEST("cpu: rope with a per-head norm first (weighted, weightless) is rms_norm then rope, bit for bit") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(14);
    for (int64_t sections : {1, 2})
      for (int64_t hd : {72, 64, 16})
        for (bool weighted : {true, false}) {
          const int64_t rows = 9, heads = 3, w = heads * hd;
          const std::string what = std::string(tessera::cpu::simd_name(level)) + " rope+norm sections " +
                                   std::to_string(sections) + " hd " + std::to_string(hd) + (weighted ? " bf16 weight" : " weightless");
          Mat x = env.make(rng, rows, w, DType::F32, 5, -3, 3), y = env.make(rng, rows, w, DType::F32, 5);
          Mat cs = env.make(rng, rows, hd), sn = env.make(rng, rows, hd), wt = env.make(rng, 1, hd, DType::BF16, 0, 0.5f, 1.5f);
          std::vector<double> ref(size_t(rows * w));
          const int64_t s = hd / sections, half = s / 2;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t h = 0; h < heads; ++h) {
              double ss = 0;
              for (int64_t j = 0; j < hd; ++j) ss += x.at(r, h * hd + j) * x.at(r, h * hd + j);
              const double rs = 1 / std::sqrt(ss / double(hd) + 1e-6);
              auto n = [&](int64_t j) { return x.at(r, h * hd + j) * rs * (weighted ? wt.at(0, j) : 1.0); };
              for (int64_t p = 0; p < sections; ++p)
                for (int64_t j = 0; j < half; ++j) {
                  const int64_t a = p * s + j, b = a + half;
                  ref[size_t(r * w + h * hd + a)] = n(a) * cs.at(r, a) - n(b) * sn.at(r, a);
                  ref[size_t(r * w + h * hd + b)] = n(b) * cs.at(r, b) + n(a) * sn.at(r, b);
                }
            }
          // the two ops it replaces, on a copy
          env.b->rms_norm(y.t, x.t, weighted ? &wt.t : nullptr, hd, 1e-6f, nullptr);
          env.b->rope(y.t, cs.t, sn.t, heads, hd, sections, nullptr);
          const HeadNorm norm{weighted ? &wt.t : nullptr, 1e-6f};
          env.b->rope(x.t, cs.t, sn.t, heads, hd, sections, &norm);
          const std::vector<float> got = env.read(x.t), two = env.read(y.t);
          expect_close(got, ref, 1e-5, what);
          EXPECT_MSG(std::memcmp(got.data(), two.data(), got.size() * 4) == 0, what << ": differs from rms_norm then rope");
        }
    Mat x = env.make(rng, 2, 32), cs = env.make(rng, 2, 16), wt = env.make(rng, 1, 8);
    const HeadNorm bad{&wt.t, 1e-6f};
    std::string msg;
    try {
      env.b->rope(x.t, cs.t, cs.t, 2, 16, 1, &bad);
    } catch (const tessera::Error& e) {
      if (e.code() == tessera::Code::InvalidArgument) msg = e.what();
    }
    EXPECT_MSG(msg.find("norm weight") != std::string::npos, "rope with an [1, 8] norm weight for head_dim 16: '" << msg << "'");
  });
}

TEST("cpu: gather_sum (bilinear taps, negative index, accumulate, bf16 table)") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(17);
    const int64_t rows = 13, taps = 4, cols = 37, trows = 20;
    for (DType td : {DType::F32, DType::BF16})
      for (bool accumulate : {false, true}) {
        Mat table = env.make(rng, trows, cols, td, 2);
        Mat y = env.make(rng, rows, cols, DType::F32, 1);
        std::vector<int32_t> idx(size_t(rows * taps));
        std::vector<float> wt(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) {
          idx[i] = i % 7 == 3 ? -1 : rng.range(0, trows - 1);
          wt[i] = rng.uniform();
        }
        Buffer* lookup = env.b->alloc(idx.size() * 8);
        env.b->upload(lookup, 0, idx.data(), idx.size() * 4);
        env.b->upload(lookup, idx.size() * 4, wt.data(), wt.size() * 4);
        std::vector<double> ref(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            double acc = accumulate ? y.at(r, c) : 0.0;
            for (int64_t t = 0; t < taps; ++t) {
              int32_t i = idx[size_t(r * taps + t)];
              if (i >= 0) acc += double(wt[size_t(r * taps + t)]) * table.at(i, c);
            }
            ref[size_t(r * cols + c)] = acc;
          }
        env.b->gather_sum(y.t, table.t, lookup, taps, accumulate);
        expect_close(env.read(y.t), ref, 1e-6, std::string("gather_sum ") + dname(td));
        // an index past the table is refused
        int32_t bad = int32_t(trows);
        env.b->upload(lookup, 0, &bad, 4);
        bool threw = false;
        try {
          env.b->gather_sum(y.t, table.t, lookup, taps, accumulate);
        } catch (const tessera::Error& e) {
          threw = e.code() == tessera::Code::InvalidArgument;
        }
        EXPECT(threw);
        env.b->release(lookup);
      }
  });
}

TEST("cpu: count_nonfinite counts NaN and inf and names the first (strided view)") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(19);
    Mat x = env.make(rng, 40, 33, DType::F32, 7);
    int64_t first = 123;
    EXPECT(env.b->count_nonfinite(x.t, &first) == 0 && first == -1);
    const float inf = INFINITY, nan = std::nanf("");
    // element (5, 2) = inf, (30, 32) = NaN, (30, 0) = -inf; the padding column (not in the view) = NaN
    auto put = [&](int64_t r, int64_t c, float v) { env.b->upload(x.buf, size_t(r * x.ld + c) * 4, &v, 4); };
    put(30, 32, nan);
    put(30, 0, -inf);
    put(5, 2, inf);
    put(3, 33, nan);
    EXPECT(env.b->count_nonfinite(x.t, &first) == 3);
    EXPECT(first == 5 * 33 + 2);
  });
}

TEST("cpu: buffers are page-aligned; upload past the end is refused") {
  Env env(Simd::Scalar, 1);
  Buffer* b = env.b->alloc(100);
  EXPECT(reinterpret_cast<uintptr_t>(b->host) % 4096 == 0);
  char data[8] = {};
  bool threw = false;
  try {
    env.b->upload(b, 96, data, 8);
  } catch (const tessera::Error& e) {
    threw = e.code() == tessera::Code::InvalidArgument;
  }
  EXPECT(threw);
  bool completed = false;
  env.b->submit([&] { completed = true; });
  env.b->finish();
  EXPECT(completed);
  env.b->release(b);
}

// ---- property tests: random shapes (seeded), every SIMD level, against the same double loops

TEST("cpu: property: linear at random shapes, dtypes, strides and epilogues") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(1234);
    for (int iter = 0; iter < 24; ++iter) {
      const int64_t m = rng.range(1, 150), k = rng.range(1, iter % 4 == 0 ? 700 : 120), n = rng.range(1, 150);
      const DType wd = DType(rng.range(0, 2));
      const Act act = Act(rng.range(0, 4));
      const bool with_bias = rng.range(0, 1), with_res = rng.range(0, 1), alias = rng.range(0, 1);
      Mat x = env.make(rng, m, k, DType::F32, rng.range(0, 5), -2, 2);
      Mat w = env.make(rng, n, k, wd, rng.range(0, 3));
      Mat bias = env.make(rng, 1, n, DType(rng.range(0, 2)));
      Mat y = env.make(rng, m, n, DType::F32, rng.range(0, 4));
      Mat res = alias ? y : env.make(rng, m, n);
      LinearArgs a;
      a.act = act;
      if (with_bias) a.bias = &bias.t;
      if (with_res) a.residual = &res.t;
      std::vector<double> ref = ref_linear(x, w);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n; ++c) {
          double acc = ref[size_t(r * n + c)];
          if (with_bias) acc += bias.at(0, c);
          acc = ref_act(act, acc);
          if (with_res) acc += res.at(r, c);
          ref[size_t(r * n + c)] = acc;
        }
      env.b->linear(y.t, x.t, w.t, a);
      expect_close(env.read(y.t), ref, 1e-5,
                   std::string(tessera::cpu::simd_name(level)) + " random linear " + std::to_string(m) + "x" +
                       std::to_string(k) + "x" + std::to_string(n) + " " + dname(wd) + " act " +
                       std::to_string(int(act)));
    }
  });
}

// Every edge of the register tile (mr x nr: 12 x 32 AVX-512, 6 x 16 AVX2, 8 x 12 NEON) and of its
// short tiles: rows 1 .. 2 mr + 1 (each short tile, a full tile, a full one plus a ragged one),
// columns around one and two panels (the unpaired or paired bf16 vectors of panel_col), K around
// the vector width and the K block, each dtype, with the weight packed at load and per call.
TEST("cpu: property: linear at every tile edge (short tiles, ragged panels, bf16 vector pairs), packed and not") {
  each_level([&](Simd level) {
    const tessera::cpu::Kernels& kk = tessera::cpu::kernels_for(level);
    const int mr = kk.mr, nr = kk.nr;
    Env env(level);
    Rng rng(uint32_t(77 + mr));
    const int64_t ns[] = {1, nr - 1, nr, nr + 1, 2 * nr - 3, 2 * nr + 8 - 1};
    const int64_t ks[] = {1, 7, 17, 255, 257};
    int iter = 0;
    for (int64_t m = 1; m <= 2 * mr + 1; ++m) {
      const int64_t n = ns[size_t(iter) % 6], k = ks[size_t(iter / 2) % 5];
      const DType wd = DType(iter % 3);
      const bool pack = iter % 2 == 0;
      ++iter;
      Mat x = env.make(rng, m, k, DType::F32, 0, -2, 2);
      Mat w = env.make(rng, n, k, wd);
      Mat y = env.make(rng, m, n);
      const std::vector<double> ref = ref_linear(x, w);
      Tensor wt = w.t;
      if (pack) env.b->pack_weight(wt);
      env.b->linear(y.t, x.t, wt, LinearArgs{});
      expect_close(env.read(y.t), ref, 1e-5,
                   std::string(tessera::cpu::simd_name(level)) + " tile edge " + std::to_string(m) + "x" +
                       std::to_string(k) + "x" + std::to_string(n) + " " + dname(wd) + (pack ? " packed" : " per call"));
    }
  });
}

// The AVX2 tables pack a bf16 pair of weight vectors for the widening the process chose
// (TESSERA_BF16_WIDEN, else the CPU's vendor: cpu_features.h); the runs of test/native-tables.test.ts
// cover both, and every GEMM test above then runs on that table.
TEST("cpu: AVX2 lays a bf16 weight pair out for its widening (unpacks on Intel, else shift and mask)") {
  if (!runs(Simd::Avx2)) return;  // not an x86 machine with AVX2
  const tessera::cpu::Kernels& kk = tessera::cpu::kernels_for(Simd::Avx2);
  EXPECT(kk.nr == 16);
  const int64_t K = 8;
  std::vector<uint16_t> w(size_t(16 * K)), dst(size_t(16 * K));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint16_t(0x4000 + i);  // distinct bits; packing only moves them
  kk.pack_b(dst.data(), w.data(), DType::BF16, K, 16, K, 16);
  const bool unpack = std::string(tessera::bf16_widening()) == "unpack";
  static const int kUnpackSlot[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
  static const int kShiftSlot[16] = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};
  for (int64_t k = 0; k < K; ++k)
    for (int j = 0; j < 16; ++j)
      EXPECT_MSG(dst[size_t(k * 16 + (unpack ? kUnpackSlot : kShiftSlot)[j])] == w[size_t(j * K + k)],
                 tessera::bf16_widening() << " column " << j << " k " << k);
}

// Either AVX2 table, on the same bf16 weights: each packs them in its own layout, and its
// micro-kernels (full and short tiles) give the same bits, so the vendor's choice changes speed only.
TEST("cpu: the two AVX2 tables (bf16 widened by unpacks or by shift and mask) give the same bits") {
  const tessera::cpu::Kernels* sh = tessera::cpu::avx2_kernels(false);
  const tessera::cpu::Kernels* up = tessera::cpu::avx2_kernels(true);
  if (!runs(Simd::Avx2)) return;  // not an x86 machine with AVX2: neither table can run
  EXPECT(sh && up && sh != up && sh->nr == up->nr && sh->mr == up->mr);
  const int mr = sh->mr, nr = sh->nr;
  Rng rng(5);
  for (int64_t kc : {1, 9, 256}) {
    for (int64_t n : {int64_t(nr), int64_t(nr - 3)}) {
      std::vector<uint16_t> w(size_t(n * kc)), bs(size_t(nr * kc)), bu(size_t(nr * kc));
      for (uint16_t& v : w) v = tessera::f32_to_bf16(rng.uniform());
      sh->pack_b(bs.data(), w.data(), DType::BF16, kc, n, kc, nr);
      up->pack_b(bu.data(), w.data(), DType::BF16, kc, n, kc, nr);
      EXPECT_MSG(bs != bu, "the layouts differ (kc " << kc << ")");  // else this test compares a table with itself
      std::vector<float> a(size_t(kc * mr)), cs(size_t(mr * nr)), cu(size_t(mr * nr));
      for (float& v : a) v = rng.uniform(-2, 2);
      std::vector<std::pair<tessera::cpu::Kernels::GemmMicro, tessera::cpu::Kernels::GemmMicro>> micros = {
          {sh->gemm_micro[size_t(DType::BF16)], up->gemm_micro[size_t(DType::BF16)]}};
      for (size_t t = 0; t < sh->gemm_tail.size(); ++t)
        if (sh->gemm_tail[t].rows)
          micros.push_back({sh->gemm_tail[t].micro[size_t(DType::BF16)], up->gemm_tail[t].micro[size_t(DType::BF16)]});
      for (const auto& [ms, mu] : micros) {
        std::fill(cs.begin(), cs.end(), 0.0f);
        std::fill(cu.begin(), cu.end(), 0.0f);
        ms(kc, a.data(), bs.data(), cs.data(), nr, false, nullptr, 0);
        mu(kc, a.data(), bu.data(), cu.data(), nr, false, nullptr, 0);
        EXPECT_MSG(std::memcmp(cs.data(), cu.data(), cs.size() * 4) == 0, "kc " << kc << " n " << n);
        EXPECT_MSG(std::any_of(cs.begin(), cs.end(), [](float v) { return v != 0.0f; }), "kc " << kc << " n " << n);
      }
    }
  }
}

// The same end to end: an AVX2 backend made with each widening (make_cpu_backend_avx2) packs the same
// bf16 weight in its own layout and gives a linear the same bits, packed at load or per call, over
// ragged panels and several weight strips.
TEST("cpu: AVX2 backends with either bf16 widening give a linear the same bits, packed and not") {
  if (!runs(Simd::Avx2)) return;  // not an x86 machine with AVX2
  Env sh(tessera::cpu::make_cpu_backend_avx2(2, false), Simd::Avx2);
  Env up(tessera::cpu::make_cpu_backend_avx2(2, true), Simd::Avx2);
  struct Shape {
    int64_t m, k, n;
  };
  for (const Shape& s : {Shape{7, 33, 40}, Shape{50, 300, 1501}, Shape{100, 1152, 3456}}) {
    for (bool pack : {true, false}) {
      Rng rs(9), ru(9);  // the same values on both sides
      Mat xs = sh.make(rs, s.m, s.k), ws = sh.make(rs, s.n, s.k, DType::BF16), ys = sh.make(rs, s.m, s.n);
      Mat xu = up.make(ru, s.m, s.k), wu = up.make(ru, s.n, s.k, DType::BF16), yu = up.make(ru, s.m, s.n);
      const std::string what = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                               (pack ? " packed" : " per call");
      if (pack) {
        EXPECT(sh.b->pack_weight(ws.t) && up.b->pack_weight(wu.t));
        EXPECT_MSG(std::memcmp(ws.t.host_ptr<char>(), wu.t.host_ptr<char>(), size_t(16 * s.k * 2)) != 0,
                   what << ": the two layouts differ");  // else both backends ran one table
      }
      sh.b->linear(ys.t, xs.t, ws.t, LinearArgs{});
      up.b->linear(yu.t, xu.t, wu.t, LinearArgs{});
      const std::vector<float> a = sh.read(ys.t), b = up.read(yu.t);
      EXPECT_MSG(std::memcmp(a.data(), b.data(), a.size() * 4) == 0, what);
    }
  }
}

// The micro-kernel runs its k loop in chunks, one prefetch of the next weight panel's slice per
// chunk: whatever the slice (none, fewer lines than k steps, more), every k step runs once, in
// order, so the bits equal the unchunked loop's; at every tile height (short tiles too) and dtype.
TEST("cpu: property: the GEMM micro-kernel's prefetch slices leave its bits unchanged") {
  each_level([&](Simd level) {
    const tessera::cpu::Kernels& kk = tessera::cpu::kernels_for(level);
    const int mr = kk.mr, nr = kk.nr;
    Rng rng(uint32_t(91 + mr));
    for (int64_t kc : {0, 1, 5, 256, 300}) {
      std::vector<float> a(size_t(kc * mr)), c0(size_t(mr * nr)), c1(size_t(mr * nr));
      std::vector<uint16_t> b(size_t(kc * nr * 2));  // f32 panels take two slots a value
      for (float& v : a) v = rng.uniform();
      for (size_t i = 0; i < b.size(); ++i)  // finite values in every dtype: exponent bits never all set
        b[i] = uint16_t((rng.range(0, 0xFFFF) & 0xBFFF) | 0x2000);
      for (float& v : c0) v = rng.uniform();
      std::vector<char> pf(size_t(tessera::cpu::Kernels::kPrefetchLine * (4 * kc + 8)));
      std::vector<tessera::cpu::Kernels::GemmMicro> micros(kk.gemm_micro.begin(), kk.gemm_micro.end());
      for (const auto& t : kk.gemm_tail)
        if (t.rows) micros.insert(micros.end(), t.micro.begin(), t.micro.end());
      for (size_t u = 0; u < micros.size(); ++u)
        for (bool accumulate : {false, true}) {
          std::vector<float> ref = c0;
          micros[u](kc, a.data(), b.data(), ref.data(), nr, accumulate, nullptr, 0);
          for (int64_t lines : {int64_t(1), int64_t(3), kc - 1, kc, kc + 5, 4 * kc}) {
            c1 = c0;
            micros[u](kc, a.data(), b.data(), c1.data(), nr, accumulate, pf.data(), lines);
            EXPECT_MSG(std::memcmp(c1.data(), ref.data(), c1.size() * 4) == 0,
                       tessera::cpu::simd_name(level) << " micro " << u << " kc " << kc << " prefetch lines " << lines
                                                       << (accumulate ? " accumulate" : ""));
          }
        }
    }
  });
}

namespace {
// The cross form: a chunk of query rows against all of one segment's keys gives those rows' bits
// (backend/backend.h), on env's backend, whatever its precision.
void expect_cross_form_bits(Env& env, const std::string& what) {
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
}  // namespace

TEST("cpu: attention's cross form: a chunk of query rows against one segment's keys gives those rows' bits") {
  each_level([&](Simd level) {
    Env env(level);
    expect_cross_form_bits(env, tessera::cpu::simd_name(level));
  });
}

TEST("cpu: property: attention at random head sizes and segments") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(4321);
    for (int iter = 0; iter < 12; ++iter) {
      const int64_t hd = rng.range(1, 140), heads = rng.range(1, 3), w = heads * hd;
      std::vector<Segment> segs;
      int64_t rows = 0;
      for (int s = rng.range(1, 3); s > 0; --s) {
        const int64_t len = rng.range(1, 120);
        segs.push_back({rows, len});
        rows += len;
      }
      Mat q = env.make(rng, rows, w, DType::F32, rng.range(0, 3), -2, 2);
      Mat k = env.make(rng, rows, w, DType::F32, rng.range(0, 3), -2, 2);
      Mat v = env.make(rng, rows, w, DType::F32, rng.range(0, 3));
      Mat out = env.make(rng, rows, w, DType::F32, rng.range(0, 3));
      const double scale = 1 / std::sqrt(double(hd));
      auto ref = ref_attention(q, k, v, heads, hd, float(scale), segs, std::vector<double>(out.v.begin(), out.v.end()));
      env.b->attention(out.t, q.t, k.t, v.t, heads, hd, float(scale), segs);
      expect_close(env.read(out.t), ref, 1e-5,
                   std::string(tessera::cpu::simd_name(level)) + " random attention hd " + std::to_string(hd) +
                       " heads " + std::to_string(heads) + " rows " + std::to_string(rows));
    }
  });
}

TEST("cpu: property: norms at random widths") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(99);
    for (int iter = 0; iter < 16; ++iter) {
      const int64_t rows = rng.range(1, 9), group = rng.range(1, 90), cols = group * rng.range(1, 4);
      Mat x = env.make(rng, rows, cols, DType::F32, rng.range(0, 3), -4, 4);
      Mat g = env.make(rng, 1, cols, DType(rng.range(0, 2))), b = env.make(rng, 1, cols, DType(rng.range(0, 2)));
      Mat wt = env.make(rng, 1, group, DType(rng.range(0, 2)));
      Mat y = env.make(rng, rows, cols, DType::F32, rng.range(0, 3));
      std::vector<double> ln(size_t(rows * cols)), rms(ln.size());
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, var = 0;
        for (int64_t c = 0; c < cols; ++c) mean += x.at(r, c);
        mean /= double(cols);
        for (int64_t c = 0; c < cols; ++c) var += (x.at(r, c) - mean) * (x.at(r, c) - mean);
        var /= double(cols);
        for (int64_t c = 0; c < cols; ++c) {
          ln[size_t(r * cols + c)] = (x.at(r, c) - mean) / std::sqrt(var + 1e-5) * g.at(0, c) + b.at(0, c);
        }
        for (int64_t g0 = 0; g0 < cols; g0 += group) {
          double ss = 0;
          for (int64_t j = 0; j < group; ++j) ss += x.at(r, g0 + j) * x.at(r, g0 + j);
          for (int64_t j = 0; j < group; ++j)
            rms[size_t(r * cols + g0 + j)] = x.at(r, g0 + j) / std::sqrt(ss / double(group) + 1e-5) * wt.at(0, j);
        }
      }
      env.b->layer_norm(y.t, x.t, g.t, b.t, 1e-5f);
      expect_close(env.read(y.t), ln, 1e-5, "random layer_norm " + std::to_string(cols));
      env.b->rms_norm(y.t, x.t, &wt.t, group, 1e-5f, nullptr);
      expect_close(env.read(y.t), rms, 1e-5, "random rms_norm group " + std::to_string(group));
    }
  });
}

namespace {
// The thread's floating-point control word (MXCSR on x86-64, FPCR on arm64).
unsigned long fp_control() {
#if defined(__x86_64__)
  unsigned v;
  __asm__ volatile("stmxcsr %0" : "=m"(v));
  return v;
#elif defined(__aarch64__)
  unsigned long v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return v;
#else
  return 0;
#endif
}
}  // namespace

TEST("cpu: kernels flush denormals internally but leave the caller's FP mode as it was") {
  each_level([&](Simd level) {
    Env env(level);
    Rng rng(77);
    const unsigned long before = fp_control();
    Mat q = env.make(rng, 40, 72), k = env.make(rng, 40, 72), v = env.make(rng, 40, 72), o = env.make(rng, 40, 72);
    env.b->attention(o.t, q.t, k.t, v.t, 1, 72, 1.0f, {{0, 40}});
    Mat x = env.make(rng, 20, 30), w = env.make(rng, 10, 30), y = env.make(rng, 20, 10);
    env.b->linear(y.t, x.t, w.t, LinearArgs{});
    EXPECT(fp_control() == before);
  });
}

TEST("cpu: workspace_bytes predicts the scratch the backend holds after a block's ops") {
  each_level([&](Simd level) {
    for (int threads : {1, 2, 3}) {
      Env env(level, threads);
      Rng rng(31);
      EXPECT(tessera::cpu::held_workspace_bytes(*env.b) == 0);
      // A small block: qkv, attention over two segments, proj, fc1, fc2 (and a row count that
      // leaves a ragged row block).
      const int64_t rows = 203, d = 48, f = 100, hd = 16, heads = d / hd;
      Mat x = env.make(rng, rows, d), qkv = env.make(rng, rows, 3 * d), o = env.make(rng, rows, d);
      Mat mlp = env.make(rng, rows, f);
      // f32 weights, packed per call: the prediction is exact. (bf16/f16 strips take half of it, and
      // weights packed at load none: the prediction is then an upper bound, tested below.)
      Mat wqkv = env.make(rng, 3 * d, d), wo = env.make(rng, d, d), w1 = env.make(rng, f, d), w2 = env.make(rng, d, f);
      std::vector<Segment> segs = {{0, 150}, {150, 53}};
      env.b->linear(qkv.t, x.t, wqkv.t, LinearArgs{});
      env.b->attention(o.t, qkv.t.cols_view(0, d), qkv.t.cols_view(d, d), qkv.t.cols_view(2 * d, d), heads, hd, 0.25f,
                       segs);
      env.b->linear(x.t, o.t, wo.t, LinearArgs{});
      env.b->linear(mlp.t, x.t, w1.t, LinearArgs{});
      env.b->linear(x.t, mlp.t, w2.t, LinearArgs{});
      tessera::cpu::Workload work;
      work.linears = {{rows, d, 3 * d}, {rows, d, d}, {rows, d, f}, {rows, f, d}};
      work.max_segment = 150;
      work.head_dim = hd;
      const uint64_t predicted = env.b->workspace_bytes(work);
      const uint64_t held = tessera::cpu::held_workspace_bytes(*env.b);
      EXPECT_MSG(held == predicted, tessera::cpu::simd_name(level) << " threads " << threads << ": held " << held
                                                                  << ", predicted " << predicted);

      // The same ops with 16-bit weights, packed at load: less held, still within the prediction.
      Env packed_env(level, threads);
      Mat w16[2] = {packed_env.make(rng, 3 * d, d, DType::BF16), packed_env.make(rng, f, d, DType::F16)};
      Mat x2 = packed_env.make(rng, rows, d), qkv2 = packed_env.make(rng, rows, 3 * d), mlp2 = packed_env.make(rng, rows, f);
      for (Mat& m : w16) packed_env.b->pack_weight(m.t);
      packed_env.b->linear(qkv2.t, x2.t, w16[0].t, LinearArgs{});
      packed_env.b->linear(mlp2.t, x2.t, w16[1].t, LinearArgs{});
      const uint64_t held16 = tessera::cpu::held_workspace_bytes(*packed_env.b);
      EXPECT_MSG(held16 <= predicted && held16 < held, tessera::cpu::simd_name(level) << " threads " << threads
                                                                                   << ": packed held " << held16);
    }
  });
}

// ---- precision 'bf16': the bf16 GEMMs against a scalar reference that rounds as each instruction does

namespace {

using tessera::cpu::Bf16Gemm;
using tessera::cpu::Precision;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// a + b rounded to odd (Arm's BFDotAdd in FEAT_BF16 without EBF16): the exact sum's truncation, its
// last bit set where the sum was inexact. TwoSum gives the exact error of the nearest-even sum.
float add_round_to_odd(float a, float b) {
  const float s = a + b, bb = s - a, e = (a - (s - bb)) + (b - bb);
  if (e == 0.0f || !std::isfinite(s)) return s;
  // s is the truncation unless it was rounded away from zero (error of the other sign)
  const float t = (e < 0) == (s > 0) ? std::nextafter(s, 0.0f) : s;
  return from_bits(bits_of(t) | 1u);
}

// One output of the bf16 GEMM: x · w, both rounded here to bf16 (nearest even; a bf16 weight's values
// are kept), K zero-padded to kstep, summed pair by pair as the level's instruction does (Bf16Gemm::Sum).
float ref_bf16_dot(Bf16Gemm::Sum rule, int64_t kstep, const float* x, const float* w, int64_t K) {
  const int64_t kp = (K + kstep - 1) / kstep * kstep;
  auto xv = [&](int64_t k) { return k < K ? tessera::bf16_to_f32(tessera::f32_to_bf16(x[k])) : 0.0f; };
  auto wv = [&](int64_t k) { return k < K ? tessera::bf16_to_f32(tessera::f32_to_bf16(w[k])) : 0.0f; };
  float acc = 0.0f;
  for (int64_t k = 0; k < kp; k += 2) {
    const float p0 = xv(k) * wv(k), p1 = xv(k + 1) * wv(k + 1);  // exact: 8-bit significands
    switch (rule) {
      case Bf16Gemm::Sum::PairOddFirst: acc = (acc + p1) + p0; break;
      case Bf16Gemm::Sum::PairEvenFirst: acc = (acc + p0) + p1; break;
      case Bf16Gemm::Sum::PairRoundToOdd: acc = add_round_to_odd(acc, add_round_to_odd(p0, p1)); break;
    }
  }
  return acc;
}

std::vector<Simd> bf16_levels() {
  std::vector<Simd> out;
  for (Simd s : tessera::cpu::supported_simd())
    if (tessera::cpu::has_bf16(s)) out.push_back(s);
  return out;
}

// The largest distance in units in the last place between two f32 results (for failure messages).
int64_t max_ulp(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t d = std::llabs(int64_t(int32_t(bits_of(a[i]))) - int64_t(int32_t(bits_of(b[i]))));
    m = std::max(m, d);
  }
  return m;
}

}  // namespace

TEST("cpu bf16: the scalar reference is the exact product within bf16 rounding of x and f32 sums (every rule)") {
  Rng rng(3);
  for (Bf16Gemm::Sum rule : {Bf16Gemm::Sum::PairOddFirst, Bf16Gemm::Sum::PairEvenFirst, Bf16Gemm::Sum::PairRoundToOdd})
    for (int64_t K : {1, 7, 64, 301, 1152}) {
      std::vector<float> x(static_cast<size_t>(K)), w(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) x[size_t(k)] = rng.uniform(), w[size_t(k)] = through(DType::BF16, rng.uniform());
      double exact = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) exact += double(x[size_t(k)]) * w[size_t(k)], mag += std::fabs(double(x[size_t(k)]) * w[size_t(k)]);
      const float got = ref_bf16_dot(rule, 4, x.data(), w.data(), K);
      // x rounded to bf16: 2^-9 relative each; K f32 additions (two per pair with round to odd): 2^-23 each
      const double bound = mag * (std::ldexp(1.0, -9) + 2.0 * double(K + 1) * std::ldexp(1.0, -23));
      EXPECT_MSG(std::fabs(got - exact) <= bound, "rule " << int(rule) << " K " << K << ": " << got << " vs " << exact);
    }
  // round to odd: inexact sums land on an odd significand, exact ones are kept
  EXPECT(add_round_to_odd(1.0f, 0.5f) == 1.5f);
  EXPECT((bits_of(add_round_to_odd(1.0f, std::ldexp(1.0f, -30))) & 1u) == 1u);
  EXPECT(add_round_to_odd(1.0f, std::ldexp(1.0f, -30)) == std::nextafter(1.0f, 2.0f));
  EXPECT(add_round_to_odd(-1.0f, -std::ldexp(1.0f, -30)) == -std::nextafter(1.0f, 2.0f));
  EXPECT(add_round_to_odd(std::nextafter(1.0f, 2.0f), -std::ldexp(1.0f, -30)) == std::nextafter(1.0f, 2.0f));
}

TEST("cpu bf16: a level without bf16 units runs f32 in precision bf16, and says so") {
  for (Simd level : tessera::cpu::supported_simd()) {
    auto f32 = tessera::cpu::make_cpu_backend(2, level, Precision::F32);
    auto bf = tessera::cpu::make_cpu_backend(2, level, Precision::Bf16);
    EXPECT(std::string(f32->precision()) == "f32");
    EXPECT_MSG(std::string(bf->precision()) == (tessera::cpu::has_bf16(level) ? "bf16" : "f32"), tessera::cpu::simd_name(level));
    if (tessera::cpu::has_bf16(level)) continue;
    // the same bits as precision f32
    Env a(std::move(f32), level), b(std::move(bf), level);
    Rng ra(11), rb(11);
    Mat xa = a.make(ra, 37, 300), wa = a.make(ra, 70, 300, DType::BF16), ya = a.make(ra, 37, 70);
    Mat xb = b.make(rb, 37, 300), wb = b.make(rb, 70, 300, DType::BF16), yb = b.make(rb, 37, 70);
    a.b->linear(ya.t, xa.t, wa.t, LinearArgs{});
    b.b->linear(yb.t, xb.t, wb.t, LinearArgs{});
    const std::vector<float> ga = a.read(ya.t), gb = b.read(yb.t);
    EXPECT_MSG(std::memcmp(ga.data(), gb.data(), ga.size() * 4) == 0, tessera::cpu::simd_name(level));
  }
  // The default backend takes the best level: bf16 exactly where this machine has a bf16 GEMM.
  const bool units = std::string(tessera::bf16_level()) != "none";
  EXPECT(std::string(tessera::cpu::make_cpu_backend(1, Precision::Bf16)->precision()) == (units ? "bf16" : "f32"));
  EXPECT(tessera::cpu::has_bf16(tessera::cpu::best_simd()) == units);
  EXPECT(std::string(tessera::cpu::make_cpu_backend(1)->precision()) == "f32");
}

TEST("cpu bf16: each bf16 level's linear is its instruction's scalar reference, bit for bit (weight dtypes, ragged sizes, strides, epilogues, packed and not)") {
  struct Shape {
    int64_t m, k, n;
  };
  const Shape shapes[] = {{1, 1, 1}, {13, 33, 35}, {37, 300, 70}, {100, 64, 96}, {5, 517, 9}, {70, 1501, 67}, {33, 2, 64}};
  for (Simd level : bf16_levels()) {
    Env env(tessera::cpu::make_cpu_backend(2, level, Precision::Bf16), level);
    const Bf16Gemm& g = *tessera::cpu::kernels_for(level).bf16;
    Rng rng(17);
    int variant = 0;
    for (const Shape& s : shapes)
      for (bool pack : {false, true}) {
        ++variant;
        const DType wd = variant % 4 == 1 ? DType::F32 : variant % 4 == 2 ? DType::F16 : DType::BF16;
        const bool with_bias = variant % 2 == 0, with_res = variant % 3 != 1, with_mul = variant % 4 == 3;
        const bool clamps = variant % 5 == 0;
        const Act acts[7] = {Act::None, Act::None, Act::QuickGelu, Act::None, Act::Silu, Act::None, Act::GeluErf};
        const Act act = acts[variant % 7];
        Mat x = env.make(rng, s.m, s.k, DType::F32, variant % 3);
        Mat w = env.make(rng, s.n, s.k, wd);
        Mat bias = env.make(rng, 1, s.n);
        Mat y = env.make(rng, s.m, s.n, DType::F32, 2);
        Mat res = env.make(rng, s.m, s.n), mul = env.make(rng, s.m, s.n, DType::F32, 0, 0.5f, 1.5f);
        LinearArgs a;
        a.act = act;
        if (with_bias) a.bias = &bias.t;
        if (with_res) a.residual = &res.t;
        if (with_mul) a.mul = &mul.t;
        if (clamps) a.in_min = -0.5f, a.in_max = 0.6f, a.out_min = -0.8f, a.out_max = 0.7f;
        Tensor wt = w.t;
        const bool packed = pack && env.b->pack_weight(wt);
        if (pack) EXPECT_MSG(packed == (s.n >= g.nr && s.k % g.kstep == 0), "pack_weight " << packed);
        env.b->linear(y.t, x.t, wt, a);
        std::vector<float> ref(size_t(s.m * s.n));
        std::vector<double> bound(size_t(s.m * s.n));  // where the rule is not bit-exact (AMX)
        std::vector<float> xr(size_t(s.k));
        for (int64_t r = 0; r < s.m; ++r) {
          for (int64_t k = 0; k < s.k; ++k) {
            float v = float(x.at(r, k));
            if (clamps) v = std::min(std::max(v, -0.5f), 0.6f);
            xr[size_t(k)] = v;
          }
          for (int64_t c = 0; c < s.n; ++c) {
            const float* wc = &w.v[size_t(c * s.k)];
            float v = ref_bf16_dot(g.sum, g.kstep, xr.data(), wc, s.k);
            double mag = 0;  // Σ |x·w| over the bf16 values
            for (int64_t k = 0; k < s.k; ++k)
              mag += std::fabs(double(through(DType::BF16, xr[size_t(k)])) * through(DType::BF16, wc[k]));
            // two f32 sums of K products, each within K·2^-24·Σ|x·w| of the exact one; the epilogue
            // scales that by the multiplier and adds one rounding of its own
            bound[size_t(r * s.n + c)] = 2.0 * double(s.k + g.kstep) * std::ldexp(mag, -24) * (with_mul ? 1.5 : 1.0);
            if (with_bias) v = v + float(bias.at(0, c));
            if (clamps) v = std::min(std::max(v, -0.8f), 0.7f);
            if (act != Act::None) v = float(ref_act(act, v));
            if (with_mul) v = v * float(mul.at(r, c));
            if (with_res) v = v + float(res.at(r, c));
            ref[size_t(r * s.n + c)] = v;
            bound[size_t(r * s.n + c)] += std::ldexp(std::fabs(double(v)), -22);
          }
        }
        const std::vector<float> got = env.read(y.t);
        const std::string what = std::string(tessera::cpu::simd_name(level)) + " " + std::to_string(s.m) + "x" +
                                 std::to_string(s.k) + "x" + std::to_string(s.n) + " " + dname(wd) + " variant " +
                                 std::to_string(variant) + (packed ? " packed" : "");
        // AMX: the SDM's pseudocode for TDPBF16PS adds each product in order, rounded to nearest
        // even, but Sapphire Rapids does not (up to 48 ulp from that at K = 33): held to the bound.
        const bool exact = g.sum != Bf16Gemm::Sum::PairEvenFirst;
        if (act == Act::None && exact) {
          EXPECT_MSG(std::memcmp(got.data(), ref.data(), got.size() * 4) == 0,
                     what << ": differs from the reference by up to " << max_ulp(got, ref) << " ulp");
        } else if (act == Act::None) {
          for (size_t i = 0; i < got.size(); ++i)
            EXPECT_MSG(std::fabs(double(got[i]) - ref[i]) <= bound[i],
                       what << ": element " << i << " " << got[i] << " vs " << ref[i] << ", bound " << bound[i]);
        } else {  // the kernels' activations are polynomials, the reference's std::erf / std::exp: close, not the same bits
          std::vector<double> refd(ref.begin(), ref.end());
          expect_close(got, refd, 3e-6, what);
        }
      }
  }
}

TEST("cpu bf16: a weight packed for the bf16 GEMM and one packed for the f32 kernels are each refused by the other") {
  for (Simd level : bf16_levels())
    for (Precision packer : {Precision::Bf16, Precision::F32}) {
      const Precision reader = packer == Precision::Bf16 ? Precision::F32 : Precision::Bf16;
      Env a(tessera::cpu::make_cpu_backend(1, level, packer), level);
      Env b(tessera::cpu::make_cpu_backend(1, level, reader), level);
      Rng rng(2);
      Mat w = a.make(rng, 64, 64, DType::BF16), x = b.make(rng, 2, 64), y = b.make(rng, 2, 64);
      Tensor t = w.t;
      EXPECT(a.b->pack_weight(t));
      Tensor foreign = b.make(rng, 64, 64, DType::BF16).t;  // t's packing on b's memory: refused before any read
      foreign.panel = t.panel;
      bool threw = false;
      try {
        b.b->linear(y.t, x.t, foreign, LinearArgs{});
      } catch (const tessera::Error& e) {
        threw = e.code() == tessera::Code::InvalidArgument;
      }
      EXPECT_MSG(threw, tessera::cpu::simd_name(level) << " packed by " << a.b->precision());
    }
}

TEST("cpu bf16: workspace_bytes predicts the scratch a bf16 backend holds") {
  for (Simd level : bf16_levels())
    for (int threads : {1, 3}) {
      Env env(tessera::cpu::make_cpu_backend(threads, level, Precision::Bf16), level);
      Rng rng(8);
      const int64_t rows = 203, d = 96, f = 200;
      Mat x = env.make(rng, rows, d), h = env.make(rng, rows, f);
      Mat w1 = env.make(rng, f, d, DType::BF16), w2 = env.make(rng, d, f, DType::F32), w3 = env.make(rng, d, f, DType::BF16);
      env.b->linear(h.t, x.t, w1.t, LinearArgs{});
      env.b->linear(x.t, h.t, w2.t, LinearArgs{});
      env.b->linear(x.t, h.t, w3.t, LinearArgs{});
      // attention over two segments (AMX: the bf16 attention's scratch)
      const int64_t hd = 16;
      Mat qkv = env.make(rng, rows, 3 * d), o = env.make(rng, rows, d);
      env.b->attention(o.t, qkv.t.cols_view(0, d), qkv.t.cols_view(d, d), qkv.t.cols_view(2 * d, d), d / hd, hd, 0.25f,
                       {{0, 150}, {150, 53}});
      tessera::cpu::Workload work;
      work.linears = {{rows, d, f}, {rows, f, d}};
      work.max_segment = 150;
      work.head_dim = hd;
      const uint64_t held = tessera::cpu::held_workspace_bytes(*env.b), predicted = env.b->workspace_bytes(work);
      // per-call strips of f32 and bf16 weights alike in bf16 panels: the prediction is exact
      EXPECT_MSG(held == predicted, tessera::cpu::simd_name(level) << ": held " << held << ", predicted " << predicted);
    }
}

// ---- precision 'bf16': attention. A level with a bf16 attention (Kernels::bf16_attention: AMX) is
// held to a scalar reference that rounds as it does: q and k split into two bf16 terms each (hi =
// bf16(x), lo = bf16(x - hi), nearest even) and the scores summed as q_hi·k_hi + q_lo·k_hi + q_hi·k_lo
// (exact products), scaled; the softmax; P and v rounded to bf16 for P·V (exact products), divided by
// the row sum of the unrounded P. The kernel's sums are not the reference's
// (AMX's rounding, the running max the online softmax rounds P against), so it is held to a bound
// derived below. A bf16 level without one runs the f32 attention: its bits.

namespace {

float to_bf16(double x) { return tessera::bf16_to_f32(tessera::f32_to_bf16(float(x))); }

struct Bf16AttnRef {
  std::vector<double> out, bound;  // [q rows][heads * hd]; rows in no segment keep init (bound 0)
};

// Query rows: a segment's own, or all of q when q and k differ in rows (one segment, all of k).
Bf16AttnRef ref_bf16_attention(const Mat& q, const Mat& k, const Mat& v, int64_t heads, int64_t hd, float scale,
                               const std::vector<Segment>& segs, const std::vector<float>& init) {
  Bf16AttnRef r{std::vector<double>(init.begin(), init.end()), std::vector<double>(init.size(), 0.0)};
  const int64_t w = heads * hd;
  const bool cross = q.rows != k.rows;
  for (const Segment& s : segs)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = cross ? 0 : s.begin; i < (cross ? q.rows : s.begin + s.length); ++i) {
        const int64_t n = s.length;
        std::vector<double> sc(static_cast<size_t>(n)), e(static_cast<size_t>(n));
        double mx = -1e300, delta = 0;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0, mag = 0;
          for (int64_t c = 0; c < hd; ++c) {
            const float qx = float(q.at(i, h * hd + c)), kx = float(k.at(s.begin + j, h * hd + c));
            const double qh = to_bf16(qx), ql = to_bf16(qx - float(qh)), kh = to_bf16(kx), kl = to_bf16(kx - float(kh));
            for (double p : {qh * kh, ql * kh, qh * kl}) d += p, mag += std::fabs(p);
          }
          sc[size_t(j)] = d * scale;
          // the kernel's score: f32 sums of the 3 hd products (two f32 sums of the same products lie
          // within 2 (K + 32) 2^-24 Σ|q·k| of each other, the AMX GEMM's bound), scaled in f32
          delta = std::max(delta, std::fabs(double(scale)) * 2.0 * double(3 * hd + 32) * std::ldexp(mag, -24) +
                                      std::ldexp(std::fabs(sc[size_t(j)]), -23));
          mx = std::max(mx, sc[size_t(j)]);
        }
        double l = 0;
        for (int64_t j = 0; j < n; ++j) l += (e[size_t(j)] = std::exp(sc[size_t(j)] - mx));
        for (int64_t c = 0; c < hd; ++c) {
          double acc = 0, mag = 0;
          for (int64_t j = 0; j < n; ++j) {
            const double vv = to_bf16(v.at(s.begin + j, h * hd + c));
            acc += double(to_bf16(e[size_t(j)])) * vv;
            mag += e[size_t(j)] * std::fabs(vv);
          }
          const size_t at = size_t(i * w + h * hd + c);
          r.out[at] = acc / l;
          // Each weight P_j / l of the kernel is the reference's times: e^(±2δ) from the scores (the
          // score and the row max each off by δ), twice, in P and in l; (1 ± 2^-9) from its own
          // rounding of P and the same from the reference's (against another max); v_exp's few ulp
          // (P and the rescale factors) and the f32 sums of l and of O (n + 32 terms each): so
          // |O - ref| <= Σ_j (P_j / l) |v_j| (2^-8 + 4.5 δ + (2n + 128) 2^-24), plus O's rounding.
          const double a = mag / l;
          r.bound[at] = a * (std::ldexp(1.0, -8) + 4.5 * delta + double(2 * n + 128) * std::ldexp(1.0, -24)) +
                        std::ldexp(std::fabs(r.out[at]), -22);
        }
      }
  return r;
}

struct AttnCase {
  int64_t hd, heads, rows, q_rows;  // q_rows != rows: cross attention (one segment over all of k)
  std::vector<Segment> segs;
  float scale;  // 0: 1 / sqrt(hd)
};

// Ragged query and key counts around the tiles (16, 32) and blocks (64 queries, 128 keys), the
// head dims of the towers (Qwen 72, Gemma 4 64, the tiny fixtures' 16) and 8, one key, cross
// attention, several segments and rows in none, scale 1 (large scores: the running max moves).
const std::vector<AttnCase>& bf16_attention_cases() {
  static const std::vector<AttnCase> cases = {
      {72, 2, 131, 131, {{0, 33}, {33, 64}, {97, 1}, {98, 31}}, 0},  // rows 129..130 in no segment
      {64, 2, 300, 300, {{0, 257}, {257, 43}}, 0},
      {16, 3, 70, 70, {{0, 70}}, 0},
      {8, 2, 45, 45, {{0, 1}, {1, 44}}, 0},
      {72, 2, 150, 37, {{0, 150}}, 0},
      {72, 1, 1, 5, {{0, 1}}, 0},
      {72, 2, 200, 200, {{0, 200}}, 1.0f},
  };
  return cases;
}

}  // namespace

TEST("cpu bf16: the attention reference is the double attention but for P's rounding, on bf16 inputs") {
  Env env(Simd::Scalar);
  Rng rng(5);
  for (const AttnCase& c : bf16_attention_cases()) {
    if (c.q_rows != c.rows) continue;  // ref_attention has no cross form
    const int64_t w = c.heads * c.hd;
    // q, k, v already bf16: the reference rounds only P (2^-9 relative), so each output is within
    // 2^-9 Σ_j (P_j / l) |v_j| <= 2^-9 max |v| of the exact attention
    Mat q = env.make(rng, c.rows, w, DType::BF16, 0, -2, 2), k = env.make(rng, c.rows, w, DType::BF16, 0, -2, 2);
    Mat v = env.make(rng, c.rows, w, DType::BF16);
    const float scale = c.scale != 0 ? c.scale : float(1 / std::sqrt(double(c.hd)));
    const std::vector<float> init(size_t(c.rows * w), 0.5f);
    const Bf16AttnRef r = ref_bf16_attention(q, k, v, c.heads, c.hd, scale, c.segs, init);
    const std::vector<double> exact =
        ref_attention(q, k, v, c.heads, c.hd, scale, c.segs, std::vector<double>(init.begin(), init.end()));
    double worst = 0;
    for (size_t i = 0; i < exact.size(); ++i) worst = std::max(worst, std::fabs(r.out[i] - exact[i]));
    EXPECT_MSG(worst <= std::ldexp(1.0, -9) + 1e-12, "hd " << c.hd << ": " << worst);
    EXPECT_MSG(worst > 0, "hd " << c.hd << ": P was not rounded");
  }
}

namespace {
struct AttnRun {
  Mat q, k, v, out;
  std::vector<float> got;
};
// One case's attention on a backend, on values drawn from seed (the same in every backend).
AttnRun run_attention(Env& e, const AttnCase& c, uint32_t seed, float scale,
                      AttnProducts products = AttnProducts::Bf16) {
  Rng rng(seed);
  const int64_t w = c.heads * c.hd;
  AttnRun r;
  r.q = e.make(rng, c.q_rows, w, DType::F32, 1, -2, 2);
  r.k = e.make(rng, c.rows, w, DType::F32, 2, -2, 2);
  r.v = e.make(rng, c.rows, w, DType::F32, 3);
  r.out = e.make(rng, c.q_rows, w, DType::F32, 1);
  e.b->attention(r.out.t, r.q.t, r.k.t, r.v.t, c.heads, c.hd, scale, c.segs, products);
  r.got = e.read(r.out.t);
  return r;
}
}  // namespace

TEST("cpu bf16: attention in precision bf16: AMX within its bound of the scalar bf16 reference, other levels and AttnProducts::F32 the f32 bits (head dims 72, 64, 16, 8, ragged rows, one key, cross, segments)") {
  for (Simd level : bf16_levels()) {
    const bool bf16_attn = tessera::cpu::kernels_for(level).bf16_attention != nullptr;
    Env env(tessera::cpu::make_cpu_backend(2, level, Precision::Bf16), level);
    Env f32(tessera::cpu::make_cpu_backend(2, level, Precision::F32), level);
    uint32_t seed = 40;
    for (const AttnCase& c : bf16_attention_cases()) {
      const float scale = c.scale != 0 ? c.scale : float(1 / std::sqrt(double(c.hd)));
      const std::string what = std::string(tessera::cpu::simd_name(level)) + " hd " + std::to_string(c.hd) + " rows " +
                               std::to_string(c.q_rows) + "x" + std::to_string(c.rows) + " seed " + std::to_string(++seed);
      const AttnRun b = run_attention(env, c, seed, scale);
      // A call that keeps the products f32 (Gemma 4's) gets the f32 attention's bits at every level.
      const AttnRun f = run_attention(f32, c, seed, scale), kept = run_attention(env, c, seed, scale, AttnProducts::F32);
      EXPECT_MSG(std::memcmp(kept.got.data(), f.got.data(), f.got.size() * 4) == 0, what << ": AttnProducts::F32 not f32");
      if (!bf16_attn) {
        EXPECT_MSG(std::memcmp(b.got.data(), f.got.data(), b.got.size() * 4) == 0, what << ": not the f32 attention's bits");
        continue;
      }
      const Bf16AttnRef r = ref_bf16_attention(b.q, b.k, b.v, c.heads, c.hd, scale, c.segs, b.out.v);
      double worst = 0;
      size_t bad = 0;
      for (size_t i = 0; i < b.got.size(); ++i) {
        const double err = std::fabs(double(b.got[i]) - r.out[i]);
        worst = std::max(worst, r.bound[i] > 0 ? err / r.bound[i] : err > 0 ? 1e30 : 0);
        if (!(err <= r.bound[i]) && bad++ == 0)
          EXPECT_MSG(false, what << ": element " << i << " " << b.got[i] << " vs " << r.out[i] << ", bound " << r.bound[i]);
      }
      std::printf("     %s: worst error %.3g of its bound, %zu outside\n", what.c_str(), worst, bad);
      if (c.q_rows != c.rows || c.segs.size() != 1) continue;
      // out aliasing q: each row is read before it is written
      Rng rng(seed);
      const int64_t w = c.heads * c.hd;
      Mat q = env.make(rng, c.rows, w, DType::F32, 1, -2, 2), k = env.make(rng, c.rows, w, DType::F32, 2, -2, 2);
      Mat v = env.make(rng, c.rows, w, DType::F32, 3);
      const Bf16AttnRef rq = ref_bf16_attention(q, k, v, c.heads, c.hd, scale, c.segs, q.v);
      env.b->attention(q.t, q.t, k.t, v.t, c.heads, c.hd, scale, c.segs);
      const std::vector<float> got = env.read(q.t);
      bad = 0;
      for (size_t i = 0; i < got.size(); ++i) bad += !(std::fabs(double(got[i]) - rq.out[i]) <= rq.bound[i]);
      EXPECT_MSG(bad == 0, what << " in place: " << bad << " outside the bound");
    }
    if (bf16_attn) expect_cross_form_bits(env, std::string(tessera::cpu::simd_name(level)) + " bf16");
  }
}
