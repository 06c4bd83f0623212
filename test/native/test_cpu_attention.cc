// Table tests of the CPU backend's attention (the flash attention driver): against a double softmax per
// segment and head, at random head sizes and segments, and its cross form, on every SIMD level.
#include "cpu_test_util.h"

using namespace cpu_test;

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
