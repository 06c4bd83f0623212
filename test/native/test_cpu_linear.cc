// Table tests of the CPU backend's linear (the GEMM driver): every dtype, ragged sizes around the
// micro-kernel and block sizes, strides, aliasing, each epilogue, packed weights, the AVX2 tables'
// bf16 widenings and the prefetch slices, on every SIMD level this machine runs, against double loops.
#include "cpu_test_util.h"

using namespace cpu_test;

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
