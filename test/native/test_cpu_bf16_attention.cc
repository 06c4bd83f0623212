// Table tests of precision 'bf16' attention on the CPU (Kernels::bf16_attention: AMX) against a scalar
// reference that rounds as it does; other levels and AttnProducts::F32 give the f32 bits.
#include "cpu_test_util.h"

using namespace cpu_test;

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
