// Table tests of the CPU backend's row and element ops (norms, add, mul, affine, rope, gather_sum,
// count_nonfinite), its buffers, FP mode and workspace prediction, on every SIMD level, against double loops.
#include "cpu_test_util.h"

using namespace cpu_test;

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

TEST("cpu: add, affine") {
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
