#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"

namespace tessera {
namespace image {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images

// Pillow's bicubic_filter, same evaluation order (a = -0.5).
double bicubic(double x) {
  const double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Pillow's clip8: the accumulator carries 22 fractional bits and a +0.5 rounding bias.
inline uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecisionBits);
}

// Rows per task: big enough that task hand-out is noise, small enough to balance 2..16 threads.
constexpr size_t kRowGrain = 8;

void for_rows(ThreadPool* pool, size_t rows, const std::function<void(size_t, size_t)>& fn) {
  if (pool && pool->size() > 1 && rows > kRowGrain) {
    pool->parallel_for(rows, fn, kRowGrain);
  } else {
    fn(0, rows);
  }
}

}  // namespace

ResampleAxis bicubic_axis(int in_size, int out_size) {
  if (in_size <= 0 || out_size <= 0)
    fail(Code::InvalidArgument, "resize: sizes must be positive (in " + std::to_string(in_size) + ", out " +
                                    std::to_string(out_size) + ")");
  const double filter_support = 2.0;
  // Pillow: scale = (double)(in1 - in0) / outSize with in0 = 0.0f, in1 = (float)in_size.
  double scale = double(float(in_size) - 0.0f) / out_size;
  double filterscale = scale < 1.0 ? 1.0 : scale;
  double support = filter_support * filterscale;
  int ksize = int(std::ceil(support)) * 2 + 1;

  ResampleAxis ax;
  ax.in_size = in_size;
  ax.out_size = out_size;
  ax.ksize = ksize;
  ax.first.resize(out_size);
  ax.count.resize(out_size);
  ax.coeffs.assign(size_t(out_size) * ksize, 0);
  std::vector<double> k(ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    double center = 0.0 + (xx + 0.5) * scale;
    double ww = 0.0;
    double ss = 1.0 / filterscale;
    int xmin = int(center - support + 0.5);  // C cast: truncation toward zero, as Pillow
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    for (int x = 0; x < xmax; ++x) {
      double w = bicubic((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[x] /= ww;
    }
    int32_t* q = &ax.coeffs[size_t(xx) * ksize];
    for (int x = 0; x < xmax; ++x) {
      // normalize_coeffs_8bpc: round half away from zero, then C truncation.
      q[x] = k[x] < 0 ? int32_t(-0.5 + k[x] * (1 << kPrecisionBits)) : int32_t(0.5 + k[x] * (1 << kPrecisionBits));
    }
    ax.first[xx] = xmin;
    ax.count[xx] = xmax;
  }
  return ax;
}

void resize_bicubic_rgb8(const uint8_t* src, int w, int h, uint8_t* dst, int ow, int oh, ThreadPool* pool) {
  if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0)
    fail(Code::InvalidArgument, "resize: empty image (" + std::to_string(w) + "x" + std::to_string(h) + " -> " +
                                    std::to_string(ow) + "x" + std::to_string(oh) + ")");
  const bool need_h = ow != w, need_v = oh != h;
  if (!need_h && !need_v) {
    std::memcpy(dst, src, size_t(w) * h * 3);
    return;
  }
  ResampleAxis vert;
  int ybox_first = 0, ybox_last = h;
  if (need_v) {
    vert = bicubic_axis(h, oh);
    ybox_first = vert.first[0];
    ybox_last = vert.first[oh - 1] + vert.count[oh - 1];
  }

  // Horizontal pass over source rows [ybox_first, ybox_last) into a uint8 temporary (or straight
  // into dst when there is no vertical pass).
  std::vector<uint8_t> tmp;
  const uint8_t* vsrc = src;  // what the vertical pass reads, row 0 = source row ybox_first
  if (need_h) {
    ResampleAxis hor = bicubic_axis(w, ow);
    const int rows = ybox_last - ybox_first;
    uint8_t* out = dst;
    if (need_v) {
      tmp.resize(size_t(rows) * ow * 3);
      out = tmp.data();
    }
    const size_t in_stride = size_t(w) * 3, out_stride = size_t(ow) * 3;
    for_rows(pool, size_t(rows), [&](size_t r0, size_t r1) {
      for (size_t r = r0; r < r1; ++r) {
        const uint8_t* in = src + (ybox_first + r) * in_stride;
        uint8_t* o = out + r * out_stride;
        for (int xx = 0; xx < ow; ++xx) {
          const int32_t* k = &hor.coeffs[size_t(xx) * hor.ksize];
          const uint8_t* p = in + size_t(hor.first[xx]) * 3;
          const int n = hor.count[xx];
          int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
          for (int x = 0; x < n; ++x) {
            s0 += int32_t(p[x * 3 + 0]) * k[x];
            s1 += int32_t(p[x * 3 + 1]) * k[x];
            s2 += int32_t(p[x * 3 + 2]) * k[x];
          }
          o[xx * 3 + 0] = clip8(s0);
          o[xx * 3 + 1] = clip8(s1);
          o[xx * 3 + 2] = clip8(s2);
        }
      }
    });
    vsrc = out;
  } else {
    vsrc = src + size_t(ybox_first) * w * 3;
  }
  if (!need_v) return;

  // Vertical pass: row accumulators, taps outermost so the inner loop runs along the row.
  const size_t row_elems = size_t(ow) * 3;
  for_rows(pool, size_t(oh), [&](size_t y0, size_t y1) {
    std::vector<int32_t> acc(row_elems);
    for (size_t yy = y0; yy < y1; ++yy) {
      const int32_t* k = &vert.coeffs[yy * vert.ksize];
      const int first = vert.first[yy] - ybox_first, n = vert.count[yy];
      std::fill(acc.begin(), acc.end(), int32_t(1) << (kPrecisionBits - 1));
      for (int y = 0; y < n; ++y) {
        const uint8_t* row = vsrc + size_t(first + y) * row_elems;
        const int32_t c = k[y];
        int32_t* a = acc.data();
        for (size_t e = 0; e < row_elems; ++e) a[e] += int32_t(row[e]) * c;
      }
      uint8_t* o = dst + yy * row_elems;
      for (size_t e = 0; e < row_elems; ++e) o[e] = clip8(acc[e]);
    }
  });
}

}  // namespace image
}  // namespace tessera
