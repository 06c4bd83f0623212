// The emulator's self-test (docs/metal-on-linux.md#check-protocol), run by test/metal-emulator.test.ts:
//   selftest                 shim unit tests (every builtin, against C++ references), sample kernels (each
//                            bit-identical under the four schedule/poison runs and close to a CPU reference),
//                            planted bugs (each must be caught); prints one line per case, then
//                            "N passed, N failed"; exit 1 if any failed
//   selftest --oob NAME      runs the out-of-bounds fixture NAME (tg_oob | dev_oob) once: under the ASan build
//                            this must end in a sanitizer report naming the .metal line
//   selftest --abort NAME    spin_wait (the watchdog) | div_zero (SIGFPE): must abort with a report
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mslemu/run.h"

using namespace mslemu;
typedef std::vector<unsigned char> Bytes;
typedef std::vector<Bytes> Bufs;

static uint16_t f2h(float f) {
  _Float16 h = (_Float16)f;
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
static float h2f(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return (float)h;
}
template <class T>
static Bytes bytes_of(const std::vector<T>& v) {
  return Bytes((const unsigned char*)v.data(), (const unsigned char*)(v.data() + v.size()));
}
template <class T>
static Bytes one(const T& v) {
  return bytes_of(std::vector<T>{v});
}
template <class T>
static std::vector<T> as(const Bytes& b) {
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

static int n_failed = 0, n_passed = 0;
static void verdict(bool ok, const std::string& name, const std::string& msg) {
  (ok ? n_passed : n_failed)++;
  std::printf("[%s] %s: %s\n", ok ? "PASS" : "FAIL", name.c_str(), msg.c_str());
  std::fflush(stdout);
}

struct Case {
  std::string kernel;
  Bufs init;
  U3 groups, threads;
  std::vector<int> outs;  // buffers compared across runs (pre-filled with the poison unless zeroed)
  bool zero_out = false;  // read-modify-write outputs (atomics) start at zero
  std::vector<TgBinding> tgmem;
};
struct RunSpec {
  Schedule s;
  uint64_t seed;
  unsigned char poison;
  const char* name;
};
static const RunSpec kQuad[] = {{Schedule::Forward, 0, 0xFF, "forward/ff"},
                                {Schedule::Reverse, 0, 0xFF, "reverse/ff"},
                                {Schedule::Shuffled, 1, 0xFF, "shuffled:1/ff"},
                                {Schedule::Shuffled, 2, 0x55, "shuffled:2/55"}};

static std::string run_once(const Case& c, const RunSpec& k, Bufs& b) {
  b = c.init;
  for (int o : c.outs) std::fill(b[size_t(o)].begin(), b[size_t(o)].end(), c.zero_out ? 0 : k.poison);
  Dispatch d;
  d.kernel = c.kernel;
  d.groups = c.groups;
  d.threads = c.threads;
  d.tgmem = c.tgmem;
  for (size_t i = 0; i < b.size(); i++) d.buffers.push_back({int(i), b[i].data(), b[i].size()});
  RunOptions o;
  o.sched = k.s;
  o.seed = k.seed;
  o.poison = k.poison;
  return run(d, o);
}

struct Outcome {
  std::string error, differs;
  Bufs out;
};
static Outcome quad(const Case& c) {
  Outcome r;
  for (auto& k : kQuad) {
    Bufs b;
    std::string err = run_once(c, k, b);
    if (!err.empty()) {
      r.error = err;
      return r;
    }
    if (r.out.empty()) r.out = b;
    else
      for (int o : c.outs)
        if (b[size_t(o)] != r.out[size_t(o)]) {
          r.differs += std::string(" ") + k.name;
          break;
        }
  }
  return r;
}

// A correct kernel: no report, bit-identical in the four runs, `check` gives the max error (<= tol).
static void correct(const Case& c, double tol, std::function<double(const Bufs&)> check) {
  Outcome r = quad(c);
  if (!r.error.empty()) return verdict(false, c.kernel, "unexpected report: " + r.error);
  if (!r.differs.empty()) return verdict(false, c.kernel, "output differs from forward/ff under" + r.differs);
  const double e = check(r.out);
  char m[200];
  std::snprintf(m, sizeof m, "identical in 4 runs; max error %.3g vs reference (tol %.1g)", e, tol);
  verdict(e <= tol, c.kernel, m);
}
// A planted bug: expect "" = the outputs must differ in some run; else the report must contain expect.
static void planted(const Case& c, const char* expect) {
  Outcome r = quad(c);
  if (!*expect) {
    if (!r.error.empty()) return verdict(false, c.kernel, "expected differing outputs, got a report: " + r.error);
    return verdict(!r.differs.empty(), c.kernel,
                   r.differs.empty() ? "NOT detected: identical in all runs" : "caught: output differs from forward/ff under" + r.differs);
  }
  const bool ok = r.error.find(expect) != std::string::npos;
  verdict(ok, c.kernel, ok ? "caught: " + r.error : "expected a report containing '" + std::string(expect) + "', got '" + r.error + "'");
}

// ---------------------------------------------------------------- shim unit tests
static double rel(double got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1;
  if (std::isinf(want)) return got == want ? 0 : 1;
  return std::fabs(got - want) / std::fmax(1.0, std::fabs(want));
}

// shim_half_rounding (tests/shim.metal): every half operation rounds, as on the GPU; also run by the
// fast-math build's selftest (--half), whose kernels were compiled with -ffast-math.
static void half_rounding_tests() {
  std::vector<uint16_t> x{f2h(1), f2h(0.00048828125f), f2h(3), f2h(2048), f2h(1), f2h(1.0009765625f), f2h(3)};
  Case c{"shim_half_rounding", {bytes_of(x), Bytes(5 * 2)}, {1, 1, 1}, {1, 1, 1}, {1}};
  const Outcome r = quad(c);
  const auto y = as<uint16_t>(r.out[1]);
  const std::vector<float> want{3.0f, 6144.0f, 3.005859375f, 3.0f, 6144.0f};
  std::string m;
  bool ok = r.error.empty() && r.differs.empty();
  for (size_t i = 0; i < want.size(); i++) {
    ok = ok && y[i] == f2h(want[i]);
    m += std::to_string(h2f(y[i])) + (i + 1 < want.size() ? "," : "");
  }
  verdict(ok, "shim half rounds every operation to binary16 (no excess precision)", r.error.empty() ? "got (" + m + ")" : r.error + r.differs);
}

static void shim_tests() {
  half_rounding_tests();
  const uint32_t n = 61;
  std::vector<float> x(n), p(n);
  for (uint32_t i = 0; i < n; i++) {
    x[i] = -3.0f + 6.0f * float(i) / float(n - 1);
    p[i] = 0.05f + 3.95f * float((i * 17) % n) / float(n - 1);
  }
  {  // scalar math
    typedef std::function<double(float, float)> F;
    auto bits_neg = [](float v) { uint32_t u; std::memcpy(&u, &v, 4); u ^= 0x80000000u; float r; std::memcpy(&r, &u, 4); return (double)r; };
    const std::vector<std::pair<const char*, F>> refs = {
        {"exp", [](float a, float) { return std::exp(a); }}, {"exp2", [](float a, float) { return std::exp2(a); }},
        {"exp10", [](float a, float) { return std::pow(10.0f, a); }}, {"log", [](float, float b) { return std::log(b); }},
        {"log2", [](float, float b) { return std::log2(b); }}, {"log10", [](float, float b) { return std::log10(b); }},
        {"sqrt", [](float, float b) { return std::sqrt(b); }}, {"rsqrt", [](float, float b) { return 1.0f / std::sqrt(b); }},
        {"sin", [](float a, float) { return std::sin(a); }}, {"cos", [](float a, float) { return std::cos(a); }},
        {"tan", [](float a, float) { return std::tan(a); }}, {"asin", [](float a, float) { return std::asin(a / 3.0f); }},
        {"acos", [](float a, float) { return std::acos(a / 3.0f); }}, {"atan", [](float a, float) { return std::atan(a); }},
        {"sinh", [](float a, float) { return std::sinh(a); }}, {"cosh", [](float a, float) { return std::cosh(a); }},
        {"tanh", [](float a, float) { return std::tanh(a); }}, {"floor", [](float a, float) { return std::floor(a); }},
        {"ceil", [](float a, float) { return std::ceil(a); }}, {"trunc", [](float a, float) { return std::trunc(a); }},
        {"round", [](float a, float) { return std::round(a); }}, {"rint", [](float a, float) { return std::rint(a); }},
        {"fabs", [](float a, float) { return std::fabs(a); }}, {"fract", [](float a, float) { return a - std::floor(a); }},
        {"sign", [](float a, float) { return a > 0 ? 1.0 : a < 0 ? -1.0 : 0.0; }},
        {"saturate", [](float a, float) { return std::fmin(std::fmax(a, 0.0f), 1.0f); }},
        {"pow", [](float a, float b) { return std::pow(b, a); }}, {"powr", [](float a, float b) { return std::pow(b, a); }},
        {"atan2", [](float a, float b) { return std::atan2(a, b); }}, {"fmod", [](float a, float b) { return std::fmod(a, b); }},
        {"copysign", [](float a, float b) { return std::copysign(b, a); }}, {"fmin", [](float a, float b) { return std::fmin(a, b); }},
        {"fmax", [](float a, float b) { return std::fmax(a, b); }}, {"step", [](float a, float b) { return a < b ? 0.0 : 1.0; }},
        {"abs", [](float a, float) { return std::fabs(a); }}, {"max", [](float a, float b) { return std::fmax(a, b); }},
        {"min", [](float a, float b) { return std::fmin(a, b); }}, {"clamp", [](float a, float b) { return std::fmin(std::fmax(a, -1.0f), b); }},
        {"mix", [](float a, float b) { return a + (b - a) * 0.25f; }}, {"fma", [](float a, float b) { return std::fma(a, b, 1.0f); }},
        {"fast::exp", [](float a, float) { return std::exp(a); }}, {"precise::exp", [](float a, float) { return std::exp(a); }},
        {"fast::tanh", [](float a, float) { return std::tanh(a); }}, {"precise::rsqrt", [](float, float b) { return 1.0f / std::sqrt(b); }},
        {"select", [](float a, float b) { return a > 0 ? b : a; }}, {"isnan", [](float a, float) { return a == 0 ? 1.0 : 0.0; }},
        {"isinf", [](float a, float) { return a != 0 ? 1.0 : 0.0; }}, {"isfinite", [](float, float) { return 1.0; }},
        {"as_type<float>", [=](float a, float) { return bits_neg(a); }},
        {"as_type<ushort>(half)", [](float a, float) { return (double)f2h(a); }}};
    Case c{"shim_math_scalar", {bytes_of(x), bytes_of(p), Bytes(refs.size() * n * 4), one(n)}, {2, 1, 1}, {32, 1, 1}, {2}};
    Bufs b;
    std::string err = run_once(c, kQuad[0], b);
    if (!err.empty()) verdict(false, "shim_math_scalar", err);
    else {
      auto y = as<float>(b[2]);
      for (size_t k = 0; k < refs.size(); k++) {
        double worst = 0;
        for (uint32_t i = 0; i < n; i++) worst = std::fmax(worst, rel(y[k * n + i], refs[k].second(x[i], p[i])));
        verdict(worst <= 1e-6, std::string("shim ") + refs[k].first, "61 values, max rel error " + std::to_string(worst));
      }
    }
  }
  {  // vector math: each slot equals the scalar function applied per component
    const uint32_t n4 = 16;
    std::vector<float> xv(n4 * 4);
    for (uint32_t i = 0; i < n4 * 4; i++) xv[i] = -3.0f + 6.0f * float((i * 7) % 64) / 63.0f;
    Case c{"shim_math_vector", {bytes_of(xv), Bytes(20 * n4 * 16), one(n4)}, {1, 1, 1}, {32, 1, 1}, {1}};
    Bufs b;
    std::string err = run_once(c, kQuad[0], b);
    auto y = as<float>(b[1]);
    const char* names[] = {"exp", "log", "sqrt", "rsqrt", "tanh", "max(v,s)", "min", "clamp(v,s,s)", "mix(v,v,s)", "fma", "abs",
                           "select(mask)", "dot/length/distance/all", "normalize", "any/all", "floor", "pow", "exp2", "sin", "cos"};
    double worst[20] = {0};
    for (uint32_t i = 0; i < n4 && err.empty(); i++) {
      const float* v = &xv[i * 4];
      float pp[4];
      for (int j = 0; j < 4; j++) pp[j] = std::fabs(v[j]) + 0.5f;
      double dot = 0, len = 0, dist = 0, nrm = 0;
      for (int j = 0; j < 4; j++) {
        dot += v[j] * pp[j];
        len += v[j] * v[j];
        dist += (v[j] - pp[j]) * (v[j] - pp[j]);
        nrm += pp[j] * pp[j];
      }
      bool all10 = true, any29 = false, allm35 = true;
      for (int j = 0; j < 4; j++) {
        all10 &= v[j] < 10;
        any29 |= v[j] > 2.9f;
        allm35 &= v[j] > -3.5f;
      }
      for (int j = 0; j < 4; j++) {
        const double a = v[j], q = pp[j];
        const double want[20] = {std::exp(a), std::log(q), std::sqrt(q), 1 / std::sqrt(q), std::tanh(a), std::fmax(a, 0.5), std::fmin(a, q),
                                 std::fmin(std::fmax(a, -1.0), 1.0), a + (q - a) * 0.5, std::fma(v[j], pp[j], v[j]), std::fabs(a), a < 0 ? q : a,
                                 j == 0 ? dot : j == 1 ? std::sqrt(len) : j == 2 ? std::sqrt(dist) : double(all10), q / std::sqrt(nrm),
                                 j == 0 ? double(any29) : j == 1 ? double(allm35) : 0.0, std::floor(a), std::pow(q, a), std::exp2(a), std::sin(a), std::cos(a)};
        for (int k = 0; k < 20; k++) worst[k] = std::fmax(worst[k], rel(y[(k * n4 + i) * 4 + j], want[k]));
      }
    }
    if (!err.empty()) verdict(false, "shim_math_vector", err);
    else
      for (int k = 0; k < 20; k++) verdict(worst[k] <= 1e-5, std::string("shim vector ") + names[k], "max rel error " + std::to_string(worst[k]));
  }
  {  // vector constructors, swizzles, half rounding
    std::vector<int32_t> xi{1, -2, 3, 40000};
    Case c{"shim_vectors", {bytes_of(xi), Bytes(5 * 16), Bytes(2 * 8), Bytes(2 * 16)}, {1, 1, 1}, {1, 1, 1}, {1, 2, 3}};
    Bufs b;
    std::string err = run_once(c, kQuad[0], b);
    auto y = as<float>(b[1]);
    auto yh = as<uint16_t>(b[2]);
    auto yu = as<uint32_t>(b[3]);
    auto eq = [&](const char* what, std::vector<double> got, std::vector<double> want) {
      bool ok = got == want;
      std::string m;
      for (size_t i = 0; i < got.size(); i++) m += std::to_string(got[i]) + (i + 1 < got.size() ? "," : "");
      verdict(ok && err.empty(), std::string("shim ") + what, err.empty() ? "got (" + m + ")" : err);
    };
    eq("float4(int4) converts values", {y[0], y[1], y[2], y[3]}, {1, -2, 3, 40000});
    eq("float4(float2, s, s) concatenates", {y[4], y[5], y[6], y[7]}, {1, -2, 0.5, 1});
    eq("float4(s) splats", {y[8], y[9], y[10], y[11]}, {2.5, 2.5, 2.5, 2.5});
    eq("swizzle .wzyx and lvalue .xy", {y[12], y[13], y[14], y[15]}, {3, 40000, -2, 1});
    eq("half sums; literals; overflow; half3", {y[16], y[17], y[18], y[19]},
       {1.001953125, (double)h2f(f2h(0.1f)), INFINITY, 3});
    eq("half4(float4)", {(double)yh[0], (double)yh[1], (double)yh[2], (double)yh[3]}, {(double)f2h(1), (double)f2h(-2), (double)f2h(3), (double)f2h(40000)});
    eq("half4 rounding to nearest", {(double)yh[4], (double)yh[5], (double)yh[6], (double)yh[7]},
       {(double)f2h(0.1f), (double)f2h(1.0f / 3.0f), (double)f2h(3.14159265f), (double)f2h(100000.0f)});
    eq("uint4(float4) truncates", {(double)yu[0], (double)yu[1], (double)yu[2], (double)yu[3]}, {1, 2, 3, 0});
    eq("as_type of vectors; sizeof(float3) == 16", {(double)yu[4], (double)yu[5], (double)yu[6], (double)yu[7]},
       {(double)0x3f800000u, (double)0xc0000000u, (double)(0x3c00u | (0x4000u << 16)), 16});
  }
  {  // builtins: grid 3x2 groups of (8,4) threads = 32 lanes... use 2D groups of 48 threads for a partial simdgroup
    const U3 groups{3, 2, 1}, threads{8, 6, 1};
    const uint32_t total = 3 * 2 * 8 * 6;
    Case c{"shim_builtins", {Bytes(total * 16 * 4)}, groups, threads, {0}};
    Bufs b;
    std::string err = run_once(c, kQuad[0], b);
    auto y = as<uint32_t>(b[0]);
    int bad = 0;
    for (uint32_t gy = 0; gy < 12 && err.empty(); gy++)
      for (uint32_t gx = 0; gx < 24; gx++) {
        const uint32_t* r = &y[(gy * 24 + gx) * 16];
        const uint32_t tx = gx % 8, ty = gy % 6, ti = ty * 8 + tx;
        const uint32_t want[16] = {gx, gy, 0, tx, ty, ti, gx / 8, gy / 6, 806, 302, 2412, ti % 32, ti / 32, 32, 2, 32};
        for (int k = 0; k < 16; k++) bad += r[k] != want[k];
      }
    verdict(err.empty() && bad == 0, "shim builtins (12 kinds, 2D grid, partial simdgroup)",
            err.empty() ? std::to_string(bad) + " wrong values of " + std::to_string(total * 16) : err);
  }
  {  // SIMD-group functions on 48 lanes (a full and a partial simdgroup)
    const uint32_t N = 48;
    std::vector<float> xf(N);
    for (uint32_t i = 0; i < N; i++) xf[i] = 0.9f + 0.01f * float((i * 13) % N) - (i % 5 == 0 ? 1.5f : 0.0f);
    for (unsigned char poison : {(unsigned char)0xFF, (unsigned char)0x55}) {
      Case c{"shim_simd", {bytes_of(xf), Bytes(N * 24 * 4), Bytes(N * 24 * 4)}, {1, 1, 1}, {N, 1, 1}, {1, 2}};
      Bufs b;
      RunSpec rs{Schedule::Shuffled, 3, poison, "shuffled"};
      std::string err = run_once(c, rs, b);
      auto yf = as<float>(b[1]);
      auto yu = as<uint32_t>(b[2]);
      std::vector<std::string> bad;
      auto chk = [&](const char* what, bool ok) {
        if (!ok && std::find(bad.begin(), bad.end(), what) == bad.end()) bad.push_back(what);
      };
      for (uint32_t t = 0; t < N && err.empty(); t++) {
        const uint32_t lane = t % 32, base = t - lane, cnt = std::min<uint32_t>(32, N - base);
        const float* f = &yf[t * 24];
        const uint32_t* r = &yu[t * 24];
        float sum = 0, prod = 1, mx = -INFINITY, mn = INFINITY, inc = 0, exc = 0, pin = 1, pex = 1;
        uint32_t a = ~0u, o = 0, xo = 0, su = 0, mxu = 0, mnu = ~0u, ballot = 0;
        for (uint32_t l = 0; l < cnt; l++) {
          const float v = xf[base + l];
          const uint32_t u = (base + l) * 7 + 3;
          sum += v;
          prod *= v;
          mx = std::fmax(mx, v);
          mn = std::fmin(mn, v);
          a &= u;
          o |= u;
          xo ^= u;
          su += u;
          mxu = std::max(mxu, u);
          mnu = std::min(mnu, u);
          if (v > 0) ballot |= 1u << l;
          if (l == lane) {
            exc = inc;
            pex = pin;
          }
          inc += v;
          pin *= v;
          if (l == lane) {
          }
        }
        // prefix sums of lanes 0..lane
        float inc2 = 0, pin2 = 1;
        for (uint32_t l = 0; l <= lane; l++) {
          inc2 += xf[base + l];
          pin2 *= xf[base + l];
        }
        auto lanev = [&](int l) -> float { return xf[base + uint32_t(l)]; };
        uint32_t pbits;
        std::memcpy(&pbits, &f[15], 4);
        const uint32_t want_poison = poison == 0xFF ? 0xFFFFFFFFu : 0x55555555u;
        chk("simd_sum", f[0] == sum);
        chk("simd_product", f[1] == prod);
        chk("simd_max", f[2] == mx);
        chk("simd_min", f[3] == mn);
        const uint32_t s4 = (lane * 5) % 32;
        chk("simd_shuffle", s4 < cnt ? f[4] == lanev(int(s4)) : std::isnan(f[4]) || poison == 0x55);
        chk("simd_shuffle_xor", (lane ^ 3) < cnt ? f[5] == lanev(int(lane ^ 3)) : true);
        chk("simd_shuffle_down", lane + 4 < 32 ? (lane + 4 < cnt ? f[6] == lanev(int(lane + 4)) : true) : f[6] == lanev(int(lane)));
        chk("simd_shuffle_up", lane >= 4 ? f[7] == lanev(int(lane - 4)) : f[7] == lanev(int(lane)));
        chk("simd_broadcast", f[8] == lanev(7));
        chk("simd_prefix_inclusive_sum", f[9] == inc2);
        chk("simd_prefix_exclusive_sum", f[10] == inc2 - lanev(int(lane)) || f[10] == exc);
        chk("simd_prefix_inclusive_product", f[11] == pin2);
        chk("simd_prefix_exclusive_product", f[12] == pex);
        chk("simd_and", r[0] == a);
        chk("simd_or", r[1] == o);
        chk("simd_xor", r[2] == xo);
        chk("simd_sum(uint)", r[3] == su);
        chk("simd_max(uint)", r[4] == mxu);
        chk("simd_min(uint)", r[5] == mnu);
        chk("simd_ballot", r[6] == ballot);
        chk("simd_all", r[7] == 1);
        chk("simd_any", r[8] == 0);
        chk("simd_broadcast_first", r[9] == base * 7 + 3);
        if (lane < 16) {
          float hs = 0;
          for (uint32_t l = 0; l < std::min<uint32_t>(16, cnt); l++) hs += xf[base + l];
          chk("divergent simd_sum (lanes < 16)", f[13] == hs);
          chk("divergent simd_shuffle_xor", f[14] == lanev(int(lane ^ 1)));
          chk("divergent simd_ballot", r[10] == ((1u << std::min<uint32_t>(16, cnt)) - 1));
          chk("divergent simd_broadcast_first", r[11] == 100);
          chk("inactive lane reads the poison", pbits == want_poison);
        } else {
          float hm = -INFINITY;
          for (uint32_t l = 16; l < cnt; l++) hm = std::fmax(hm, xf[base + l]);
          chk("divergent simd_max (lanes >= 16)", f[13] == hm);
        }
      }
      std::string m = err;
      if (err.empty()) {
        for (auto& s : bad) m += (m.empty() ? "wrong: " : ", ") + s;
        if (bad.empty()) m = "23 functions, full and partial simdgroup, divergent halves, inactive lane = poison";
      }
      verdict(err.empty() && bad.empty(), std::string("shim simd_* (poison ") + (poison == 0xFF ? "ff" : "55") + ")", m);
    }
  }
  {  // simdgroup_matrix
    std::vector<float> A(256), B(256);
    for (int i = 0; i < 256; i++) {
      A[i] = float((i * 7) % 13) - 6.0f;
      B[i] = float((i * 5) % 11) * 0.5f - 2.0f;
    }
    Case c{"shim_matrix", {bytes_of(A), bytes_of(B), Bytes(256 * 4), Bytes(64 * 2)}, {1, 1, 1}, {32, 1, 1}, {2, 3}, true};  // C is written in 3 of 4 quadrants
    Outcome r = quad(c);
    double e1 = 0, e2 = 0, e3 = 0, e4 = 0;
    if (r.error.empty()) {
      auto C = as<float>(r.out[2]);
      auto H = as<uint16_t>(r.out[3]);
      for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
          double s = 0;
          for (int k = 0; k < 16; k++) s += double(A[i * 16 + k]) * B[k * 16 + j];
          e1 = std::fmax(e1, std::fabs(C[i * 16 + j] - s));
          double t = 0;  // (A[8:16,8:16])^T * B[8:16,8:16]
          for (int k = 0; k < 8; k++) t += double(A[(8 + k) * 16 + 8 + i]) * B[(8 + k) * 16 + 8 + j];
          e2 = std::fmax(e2, std::fabs(C[(8 + i) * 16 + 8 + j] - t));
          e3 = std::fmax(e3, std::fabs(C[i * 16 + 8 + j] - B[j * 16 + i]));
          e4 = std::fmax(e4, std::fabs(h2f(H[i * 8 + j]) - 3.0));
        }
    }
    const bool ok = r.error.empty() && r.differs.empty();
    verdict(ok && e1 == 0, "shim simdgroup_load(device, origin)/load(threadgroup)/multiply_accumulate/store", ok ? "max err " + std::to_string(e1) : r.error + r.differs);
    verdict(ok && e2 == 0, "shim simdgroup_load(transposed)/simdgroup_multiply", ok ? "max err " + std::to_string(e2) : r.error + r.differs);
    verdict(ok && e3 == 0, "shim simdgroup_store(transposed)", ok ? "max err " + std::to_string(e3) : r.error + r.differs);
    verdict(ok && e4 == 0, "shim simdgroup_half8x8 / make_filled_simdgroup_matrix", ok ? "max err " + std::to_string(e4) : r.error + r.differs);
  }
  {  // atomics: 4 groups x 64 threads
    const uint32_t N = 256;
    std::vector<uint32_t> a(10, 0);
    a[3] = ~0u;
    std::vector<int32_t> b(2, 0);
    Case c{"shim_atomics", {bytes_of(a), bytes_of(b), Bytes(4)}, {4, 1, 1}, {64, 1, 1}, {}};
    Bufs out;
    std::string err = run_once(c, kQuad[2], out);
    auto ra = as<uint32_t>(out[0]);
    auto rb = as<int32_t>(out[1]);
    auto rf = as<float>(out[2]);
    uint32_t sum = 0, x = 0, tg = 0;
    for (uint32_t g = 0; g < N; g++) {
      sum += g;
      x ^= g;
    }
    for (uint32_t g = 0; g < 4; g++)
      for (uint32_t t = 0; t < 64; t++) tg += g * 64 + t + 1;
    const bool ok = err.empty() && ra[0] == sum && rb[1] == -int32_t(sum) && ra[2] == (N - 1) * 3 && ra[3] == 5 && ra[4] < N && ra[5] == 1 &&
                    ra[6] == 1 && rf[0] == 128.0f && ra[7] == tg && ra[8] == 0xffffffffu && ra[9] == x;
    verdict(ok, "shim atomics (add/sub/min/max/exchange/cas/or/xor/float add/threadgroup atomic/load/store)",
            err.empty() ? (ok ? "all 10 results right" : "a result is wrong") : err);
  }
  {  // [[threadgroup(i)]] lengths and a declared threadgroup scalar
    const uint32_t T = 40;
    Case c{"shim_tgmem", {Bytes(T * 4)}, {2, 1, 1}, {T, 1, 1}, {0}};
    c.tgmem = {{0, 160}, {1, 160}};
    Outcome r = quad(c);
    double want = 0;
    for (uint32_t i = 0; i < T; i++) want += 3.0 * i;
    double e = 0;
    if (r.error.empty())
      for (float v : as<float>(r.out[0])) e = std::fmax(e, std::fabs(v - want));
    verdict(r.error.empty() && r.differs.empty() && e == 0, "shim [[threadgroup(i)]] and threadgroup scalars", r.error.empty() ? "identical in 4 runs, exact" : r.error);
    Case bad = c;
    bad.tgmem = {{0, 100}, {1, 160}};
    Outcome rb = quad(bad);
    verdict(rb.error.find("multiple of 16") != std::string::npos, "threadgroup length not a multiple of 16 is refused", rb.error);
    Case unbound = c;
    unbound.tgmem = {{0, 160}};
    Outcome ru = quad(unbound);
    verdict(ru.error.find("[[threadgroup(1)]] has no length set") != std::string::npos, "unset [[threadgroup(1)]] is reported", ru.error);
  }
}

// ---------------------------------------------------------------- sample kernels and planted bugs
static void sample_tests() {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> U(-2, 2);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = U(rng);
    return v;
  };
  auto rnd_h = [&](size_t n, float scale, float bias) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = f2h(bias + scale * U(rng));
    return v;
  };
  {
    const uint32_t R = 16, C = 200;
    auto x = rnd(R * C);
    struct {
      uint32_t r, c;
      float s;
    } p{R, C, 0.5f};
    correct({"sample_softmax_f32", {bytes_of(x), Bytes(R * C * 4), one(p)}, {R, 1, 1}, {128, 1, 1}, {1}}, 1e-6, [&](const Bufs& o) {
      auto y = as<float>(o[1]);
      double err = 0;
      for (uint32_t r = 0; r < R; r++) {
        double m = -1e30, s = 0;
        for (uint32_t c = 0; c < C; c++) m = std::max(m, 0.5 * x[r * C + c]);
        for (uint32_t c = 0; c < C; c++) s += std::exp(0.5 * x[r * C + c] - m);
        for (uint32_t c = 0; c < C; c++) err = std::max(err, std::fabs(y[r * C + c] - std::exp(0.5 * x[r * C + c] - m) / s));
      }
      return err;
    });
  }
  {
    const uint32_t M = 64, N = 64, K = 64;
    auto A = rnd(M * K), B = rnd(K * N);
    std::vector<uint32_t> p{M, N, K};
    correct({"sample_gemm_f32_sg", {bytes_of(A), bytes_of(B), Bytes(M * N * 4), bytes_of(p)}, {N / 32, M / 32, 1}, {128, 1, 1}, {2}}, 1e-4,
            [&](const Bufs& o) {
              auto Cm = as<float>(o[2]);
              double err = 0;
              for (uint32_t i = 0; i < M; i++)
                for (uint32_t j = 0; j < N; j++) {
                  double s = 0;
                  for (uint32_t k = 0; k < K; k++) s += (double)A[i * K + k] * B[k * N + j];
                  err = std::max(err, std::fabs(s - Cm[i * N + j]));
                }
              return err;
            });
  }
  {
    const uint32_t R = 8, C4 = 64, C = 4 * C4;
    auto x = rnd_h(R * C, 1, 0), g = rnd_h(C, 0.1f, 1), be = rnd_h(C, 0.1f, 0);
    Case c{"sample_layernorm_f16", {bytes_of(x), bytes_of(g), bytes_of(be), Bytes(R * C * 2), one(C4), one(1e-5f)}, {R, 1, 1}, {64, 1, 1}, {3}};
    c.tgmem = {{0, 128}};
    correct(c, 1e-2, [&](const Bufs& o) {
      auto y = as<uint16_t>(o[3]);
      double err = 0;
      for (uint32_t r = 0; r < R; r++) {
        double m = 0, v = 0;
        for (uint32_t i = 0; i < C; i++) m += h2f(x[r * C + i]);
        m /= C;
        for (uint32_t i = 0; i < C; i++) v += (h2f(x[r * C + i]) - m) * (h2f(x[r * C + i]) - m);
        v /= C;
        for (uint32_t i = 0; i < C; i++)
          err = std::max(err, std::fabs(h2f(y[r * C + i]) - ((h2f(x[r * C + i]) - m) / std::sqrt(v + 1e-5) * h2f(g[i]) + h2f(be[i]))));
      }
      return err;
    });
  }
  {
    const uint32_t n4 = 250;
    auto x = rnd_h(n4 * 4, 1, 0);
    correct({"sample_gelu_f16", {bytes_of(x), Bytes(n4 * 8), one(n4)}, {4, 1, 1}, {64, 1, 1}, {1}}, 4e-3, [&](const Bufs& o) {
      auto y = as<uint16_t>(o[1]);
      double err = 0;
      for (uint32_t i = 0; i < n4 * 4; i++) {
        double v = h2f(x[(i % 4 < 2) ? (i ^ 1) : i]), ref = 0.5 * v * (1 + std::tanh(0.7978845608 * (v + 0.044715 * v * v * v)));
        err = std::max(err, std::fabs(h2f(y[i]) - ref));
      }
      return err;
    });
  }
  {
    const uint32_t n = 1000;
    std::vector<uint32_t> x(n);
    uint64_t s = 0;
    for (auto& v : x) {
      v = rng() % 1000;
      s += v;
    }
    Case c{"sample_reduce_sum_u32", {bytes_of(x), Bytes(4), one(n)}, {(n + 255) / 256, 1, 1}, {256, 1, 1}, {1}, true};
    correct(c, 0, [&](const Bufs& o) { return std::fabs((double)as<uint32_t>(o[1])[0] - (double)s); });
  }
  {
    std::vector<float> x{1.5f, 2.25f, -4.0f, 8.125f};
    correct({"sample_addr_space_ok", {bytes_of(x), Bytes(4)}, {1, 1, 1}, {32, 1, 1}, {1}}, 0,
            [&](const Bufs& o) { return std::fabs(as<float>(o[1])[0] - (x[0] + x[1] + x[2] + x[3])); });
  }
  auto ramp = [](size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = float(i % 97);
    return bytes_of(v);
  };
  planted({"race_missing_barrier", {ramp(256), Bytes(256 * 4)}, {1, 1, 1}, {256, 1, 1}, {1}}, "");
  planted({"reuse_without_barrier", {ramp(128), Bytes(128 * 4)}, {1, 1, 1}, {128, 1, 1}, {1}}, "");
  planted({"uninit_read", {ramp(128), Bytes(128 * 4)}, {1, 1, 1}, {128, 1, 1}, {1}}, "");
  planted({"early_return_barrier", {ramp(100), Bytes(100 * 4), one(100u)}, {2, 1, 1}, {64, 1, 1}, {1}}, "some threads returned while others wait");
  planted({"divergent_barrier", {Bytes(32 * 4)}, {1, 1, 1}, {32, 1, 1}, {0}}, "threads wait at different threadgroup_barrier calls");
  planted({"divergent_matrix", {Bytes(64 * 4)}, {1, 1, 1}, {32, 1, 1}, {0}}, "simdgroup_matrix ops need uniform control flow");
  planted({"matrix_after_early_return", {Bytes(64 * 4)}, {1, 1, 1}, {32, 1, 1}, {0}}, "simdgroup_matrix ops need uniform control flow");
  planted({"divergent_collective_deadlock", {Bytes(64 * 4)}, {1, 1, 1}, {64, 1, 1}, {0}}, "threads wait at different threadgroup_barrier calls");
  planted({"constant_too_small", {Bytes(64 * 4), Bytes(4)}, {1, 1, 1}, {32, 1, 1}, {0}}, "[[buffer(1)]] is 4 bytes, the kernel's parameter needs 8");
  planted({"unbound_buffer", {Bytes(64 * 4)}, {1, 1, 1}, {32, 1, 1}, {0}}, "reads [[buffer(2)]] but nothing is bound there");
  planted({"tg_overflow", {Bytes(64 * 4)}, {1, 1, 1}, {32, 1, 1}, {0}}, "threadgroup memory exceeds 32 KiB");
  {
    Case c{"race_missing_barrier", {ramp(256), Bytes(256 * 4)}, {1, 1, 1}, {1025, 1, 1}, {1}};
    planted(c, "threads per threadgroup must be 1..1024");
  }
  {  // a misaligned binding: a float buffer bound 2 bytes into an allocation
    Bytes big(260 * 4);
    Dispatch d;
    d.kernel = "race_missing_barrier";
    d.threads = {32, 1, 1};
    d.buffers = {{0, big.data() + 2, 256 * 4}, {1, big.data() + 4, 64 * 4}};
    std::string e = run(d, RunOptions{});
    verdict(e.find("not aligned") != std::string::npos, "misaligned_buffer", e.empty() ? "NOT detected" : "caught: " + e);
  }
  {
    Dispatch d;
    d.kernel = "no_such_kernel";
    std::string e = run(d, RunOptions{});
    verdict(e.find("unknown kernel no_such_kernel") != std::string::npos, "unknown_kernel", e);
  }
}

static int oob(const char* which) {
  std::vector<float> x(64, 1.0f), y(64);
  const bool tg = !std::strcmp(which, "tg_oob");
  Dispatch d;
  d.kernel = which;
  d.threads = {tg ? 32u : 64u, 1, 1};
  if (tg) d.buffers = {{0, y.data(), y.size() * 4}};
  else d.buffers = {{0, x.data(), x.size() * 4}, {1, y.data(), y.size() * 4}};
  std::string e = run(d, RunOptions{});
  std::printf("%s: %s\n", which, e.empty() ? "finished without any report" : e.c_str());
  return 0;
}

// tests/abort.metal: each must end the process with a report naming the kernel (spin_wait | div_zero).
static int abort_case(const char* which) {
  std::vector<uint32_t> zero(32, 0), y(32, 0);
  Dispatch d;
  d.kernel = which;
  d.threads = {32, 1, 1};
  d.buffers = {{0, zero.data(), zero.size() * 4}, {1, y.data(), y.size() * 4}};
  std::string e = run(d, RunOptions{});
  std::printf("%s: returned instead of aborting: %s\n", which, e.empty() ? "no report" : e.c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--oob")) return oob(argv[2]);
  if (argc == 3 && !std::strcmp(argv[1], "--abort")) return abort_case(argv[2]);
  if (argc == 2 && !std::strcmp(argv[1], "--half")) {
    half_rounding_tests();
    std::printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
  }
  shim_tests();
  sample_tests();
  const Stats s = stats();
  std::printf("emulator work: %llu lane switches, %llu collectives, %llu barriers\n", (unsigned long long)s.switches,
              (unsigned long long)s.collectives, (unsigned long long)s.barriers);
  std::printf("%d passed, %d failed\n", n_passed, n_failed);
  return n_failed ? 1 : 0;
}
