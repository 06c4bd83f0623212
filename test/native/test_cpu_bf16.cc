// Table tests of precision 'bf16' on the CPU: each bf16 level's GEMM against a scalar reference that
// rounds as its instruction does, the fallback on levels without bf16 units, packing and workspace.
#include "cpu_test_util.h"

using namespace cpu_test;

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
