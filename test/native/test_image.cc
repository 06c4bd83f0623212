// native/image: invariants of the Pillow resize that hold exactly, Pillow's conversion formulas at
// hand-checked points, and the two patch layouts element by element. (Byte-exactness against
// Pillow and HF themselves is tested from vitest: test/image-resize.test.ts, test/preprocess-*.)
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "harness.h"
#include "image/convert.h"
#include "image/patchify.h"
#include "image/preprocess.h"
#include "image/resize.h"

using namespace tessera;
using namespace tessera::image;

TEST("image: an unchanged axis is one tap of exactly 2^22") {
  for (int n : {1, 2, 7, 64}) {
    ResampleAxis ax = bicubic_axis(n, n);
    for (int o = 0; o < n; ++o) {
      int64_t sum = 0, nonzero = 0;
      for (int j = 0; j < ax.count[o]; ++j) {
        int32_t q = ax.coeffs[size_t(o) * ax.ksize + j];
        sum += q;
        if (q) {
          ++nonzero;
          EXPECT(ax.first[o] + j == o);
        }
      }
      EXPECT(sum == (1 << 22) && nonzero == 1);
    }
  }
}

TEST("image: coefficient sums stay within rounding of 2^22 and taps inside the input") {
  const int sizes[] = {1, 3, 17, 30, 100, 451, 1000};
  for (int in : sizes) {
    for (int out : sizes) {
      ResampleAxis ax = bicubic_axis(in, out);
      for (int o = 0; o < out; ++o) {
        int64_t sum = 0;
        for (int j = 0; j < ax.count[o]; ++j) sum += ax.coeffs[size_t(o) * ax.ksize + j];
        EXPECT_MSG(std::llabs(sum - (1 << 22)) <= ax.count[o], in << "->" << out << " o=" << o << " sum=" << sum);
        EXPECT(ax.first[o] >= 0 && ax.count[o] >= 1 && ax.first[o] + ax.count[o] <= in && ax.count[o] <= ax.ksize);
      }
    }
  }
}

TEST("image: a constant image stays constant through any resize, threaded or not") {
  ThreadPool pool(3);
  for (auto [w, h, ow, oh] : std::vector<std::array<int, 4>>{{30, 20, 480, 288}, {451, 300, 32, 17}, {5, 900, 64, 32}}) {
    std::vector<uint8_t> src(size_t(w) * h * 3);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i % 3 == 0 ? 0 : i % 3 == 1 ? 200 : 255);
    std::vector<uint8_t> a(size_t(ow) * oh * 3), b(a.size());
    resize_bicubic_rgb8(src.data(), w, h, a.data(), ow, oh, nullptr);
    resize_bicubic_rgb8(src.data(), w, h, b.data(), ow, oh, &pool);
    EXPECT(a == b);
    for (size_t i = 0; i < a.size(); ++i) EXPECT(a[i] == src[i % 3]);
  }
}

TEST("image: threaded resize equals single-threaded on noise") {
  ThreadPool pool(4);
  const int w = 333, h = 217, ow = 128, oh = 480;
  std::vector<uint8_t> src(size_t(w) * h * 3);
  uint32_t s = 12345;
  for (auto& v : src) v = uint8_t((s = s * 1664525u + 1013904223u) >> 24);
  std::vector<uint8_t> a(size_t(ow) * oh * 3), b(a.size());
  resize_bicubic_rgb8(src.data(), w, h, a.data(), ow, oh, nullptr);
  resize_bicubic_rgb8(src.data(), w, h, b.data(), ow, oh, &pool);
  EXPECT(a == b);
}

TEST("image: empty sizes are refused") {
  uint8_t px[3] = {0, 0, 0}, out[3];
  bool threw = false;
  try {
    resize_bicubic_rgb8(px, 1, 1, out, 0, 1, nullptr);
  } catch (const Error& e) {
    threw = e.code() == Code::InvalidArgument;
  }
  EXPECT(threw);
}

TEST("image: Pillow conversion rules (alpha dropped, I;16 clipped, 16-bit high byte, CMYK)") {
  auto one = [](const void* px, PixelFormat f) {
    std::vector<uint8_t> o(3);
    to_rgb8(px, f, 1, 1, o.data(), nullptr);
    return o;
  };
  uint8_t rgba[4] = {10, 20, 30, 0};
  EXPECT((one(rgba, PixelFormat::RGBA8) == std::vector<uint8_t>{10, 20, 30}));
  uint8_t la[2] = {77, 3};
  EXPECT((one(la, PixelFormat::GrayA8) == std::vector<uint8_t>{77, 77, 77}));
  uint16_t g16a = 200, g16b = 256, g16c = 65535;
  EXPECT((one(&g16a, PixelFormat::Gray16) == std::vector<uint8_t>{200, 200, 200}));
  EXPECT((one(&g16b, PixelFormat::Gray16) == std::vector<uint8_t>{255, 255, 255}));
  EXPECT((one(&g16c, PixelFormat::Gray16) == std::vector<uint8_t>{255, 255, 255}));
  uint16_t rgb16[3] = {0x12ff, 0xab00, 0x00ff};
  EXPECT((one(rgb16, PixelFormat::RGB16) == std::vector<uint8_t>{0x12, 0xab, 0x00}));
  uint16_t la16[2] = {0x8081, 0x0000};
  EXPECT((one(la16, PixelFormat::GrayA16) == std::vector<uint8_t>{0x80, 0x80, 0x80}));
  uint8_t white[4] = {0, 0, 0, 0}, black[4] = {0, 0, 0, 255}, cyan[4] = {255, 0, 0, 0};
  EXPECT((one(white, PixelFormat::CMYK8) == std::vector<uint8_t>{255, 255, 255}));
  EXPECT((one(black, PixelFormat::CMYK8) == std::vector<uint8_t>{0, 0, 0}));
  EXPECT((one(cyan, PixelFormat::CMYK8) == std::vector<uint8_t>{0, 255, 255}));
  // A GIF's transparent pixels (decoded as transparent black) show the palette colour given.
  uint8_t clear[4] = {0, 0, 0, 0}, opaque[4] = {1, 2, 3, 255}, key[3] = {184, 177, 173};
  std::vector<uint8_t> o(3);
  to_rgb8(clear, PixelFormat::RGBA8, 1, 1, o.data(), nullptr, key);
  EXPECT((o == std::vector<uint8_t>{184, 177, 173}));
  to_rgb8(opaque, PixelFormat::RGBA8, 1, 1, o.data(), nullptr, key);
  EXPECT((o == std::vector<uint8_t>{1, 2, 3}));
  // 50% K, 50% C: nk = 127; R = 127 - round(128 * 127 / 255) = 127 - 64 = 63.
  uint8_t half[4] = {128, 0, 0, 128};
  EXPECT((one(half, PixelFormat::CMYK8) == std::vector<uint8_t>{63, 127, 127}));
}

TEST("image: rescale/normalise table is HF's float32 arithmetic") {
  Normalize n;
  n.do_normalize = true;
  for (int c = 0; c < 3; ++c) n.mean[c] = n.std[c] = 0.5f;
  auto lut = build_lut(n);
  EXPECT(lut[0] == -1.0f && lut[255] == 1.0f && lut[256 + 255] == 1.0f);
  for (int u = 0; u < 256; ++u) {
    float r = float(double(u) * 0.00392156862745098);
    EXPECT(lut[u] == (r - 0.5f) / 0.5f);
  }
  Normalize g;  // Gemma: rescale only; equals the float32 division u / 255.0f for every value
  auto gl = build_lut(g);
  for (int u = 0; u < 256; ++u) EXPECT(gl[u] == float(u) / 255.0f);
}

// A 64x32 image whose bytes encode (x, y, c): v = (x * 3 + y * 5 + c * 7) % 251.
static std::vector<uint8_t> coded_image(int w, int h) {
  std::vector<uint8_t> img(size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) img[(size_t(y) * w + x) * 3 + c] = uint8_t((x * 3 + y * 5 + c * 7) % 251);
  return img;
}
static uint8_t coded(int x, int y, int c) { return uint8_t((x * 3 + y * 5 + c * 7) % 251); }

TEST("image: qwen rows are merge windows, elements (c, t, y, x), frame repeated") {
  const int w = 64, h = 32, P = 16, T = 2, m = 2;
  auto img = coded_image(w, h);
  const int gh = h / P, gw = w / P;
  std::vector<uint8_t> out(size_t(gh) * gw * 3 * T * P * P);
  patchify_qwen(img.data(), w, h, QwenLayout{P, T, m}, out.data(), nullptr);
  size_t row = 0;
  for (int br = 0; br < gh / m; ++br)
    for (int bc = 0; bc < gw / m; ++bc)
      for (int ir = 0; ir < m; ++ir)
        for (int ic = 0; ic < m; ++ic, ++row)
          for (int c = 0; c < 3; ++c)
            for (int t = 0; t < T; ++t)
              for (int y = 0; y < P; ++y)
                for (int x = 0; x < P; ++x) {
                  uint8_t got = out[row * 3 * T * P * P + ((size_t(c) * T + t) * P + y) * P + x];
                  EXPECT(got == coded((bc * m + ic) * P + x, (br * m + ir) * P + y, c));
                }
  EXPECT(row == size_t(gh) * gw);
}

TEST("image: gemma rows are row-major patches, elements (dy, dx, c), positions (x, y)") {
  const int w = 48, h = 32, P = 16;
  auto img = coded_image(w, h);
  const int hp = h / P, wp = w / P;
  std::vector<uint8_t> out(size_t(hp) * wp * P * P * 3);
  std::vector<int32_t> pos(size_t(hp) * wp * 2);
  patchify_gemma(img.data(), w, h, P, out.data(), pos.data(), nullptr);
  for (int r = 0; r < hp; ++r)
    for (int c = 0; c < wp; ++c) {
      size_t n = size_t(r) * wp + c;
      EXPECT(pos[2 * n] == c && pos[2 * n + 1] == r);
      for (int dy = 0; dy < P; ++dy)
        for (int dx = 0; dx < P; ++dx)
          for (int ch = 0; ch < 3; ++ch)
            EXPECT(out[n * P * P * 3 + (size_t(dy) * P + dx) * 3 + ch] == coded(c * P + dx, r * P + dy, ch));
    }
}

TEST("image: the pipeline refuses short buffers and sizes off the patch grid") {
  std::vector<uint8_t> px(10 * 10 * 3);
  PreprocessRequest r;
  r.pixels = px.data();
  r.pixel_bytes = px.size() - 1;
  r.width = r.height = 10;
  r.target_width = r.target_height = 32;
  auto code_of = [&]() {
    try {
      output_shape(r);
    } catch (const Error& e) {
      return e.code();
    }
    return Code::Internal;
  };
  EXPECT(code_of() == Code::InvalidArgument);
  r.pixel_bytes = px.size();
  EXPECT(output_shape(r).rows == 4 && output_shape(r).row_len == 1536);
  r.target_width = 48;  // not a multiple of 32
  EXPECT(code_of() == Code::InvalidArgument);
  r.layout = Layout::Gemma;  // a multiple of 16 is enough there
  EXPECT(output_shape(r).rows == 6 && output_shape(r).row_len == 768);
}

#include "common/cpu_features.h"
#include "image/resize_kernels.h"

// Every ISA's kernels give the baseline's bytes (the baseline is Pillow-exact: test/image-resize).
TEST("image: SIMD resize kernels equal the baseline kernels") {
  std::vector<std::pair<const char*, kernels::Kernels>> sets{{"baseline", kernels::baseline_kernels()}};
#if defined(__x86_64__) || defined(_M_X64)
  if (cpu_features().avx2_fma) sets.push_back({"avx2", kernels::avx2_kernels()});
  if (cpu_features().avx512) sets.push_back({"avx512", kernels::avx512_kernels()});
#endif
  const int w = 203, h = 19, ow = 61;
  std::vector<uint8_t> src(size_t(w) * h * 3);
  uint32_t s = 99;
  for (auto& v : src) v = uint8_t((s = s * 1664525u + 1013904223u) >> 24);
  ResampleAxis ax = bicubic_axis(w, ow), vax = bicubic_axis(h, 7);
  kernels::AxisView hv{ax.in_size, ax.out_size, ax.ksize, ax.first.data(), ax.count.data(), ax.coeffs.data()};
  kernels::AxisView vv{vax.in_size, vax.out_size, vax.ksize, vax.first.data(), vax.count.data(), vax.coeffs.data()};
  std::vector<std::vector<uint8_t>> hout, vout;
  for (auto& [name, k] : sets) {
    std::vector<uint8_t> o(size_t(8) * ow * 3, 0);
    std::vector<int32_t> t(size_t(w) * 3 * kernels::kRowBlock);
    const uint8_t* in[8];
    uint8_t* out[8];
    for (int r = 0; r < 8; ++r) in[r] = src.data() + size_t(r) * w * 3, out[r] = r < 6 ? o.data() + size_t(r) * ow * 3 : nullptr;
    k.horizontal(hv, in, out, t.data());
    hout.push_back(o);
    std::vector<uint8_t> vo(size_t(7) * w * 3);
    std::vector<int32_t> acc(size_t(w) * 3);
    k.vertical(vv, 0, src.data(), size_t(w) * 3, vo.data(), 0, 7, acc.data());
    vout.push_back(vo);
  }
  for (size_t i = 1; i < sets.size(); ++i) EXPECT_MSG(hout[i] == hout[0] && vout[i] == vout[0], sets[i].first);
}
