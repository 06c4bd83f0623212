#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "common/cpu_features.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "image/resize_kernels.h"

namespace tessera {
namespace image {
namespace kernels {
namespace {
void vertical_base(const AxisView& ax, int shift, const uint8_t* in, size_t row_elems, uint8_t* out, size_t y0, size_t y1,
                   int32_t* acc) {
  vertical_rows(ax, shift, in, row_elems, out, y0, y1, acc);
}
void horizontal_base(const AxisView& ax, const uint8_t* const* in, uint8_t* const* out, int32_t* t) {
  horizontal_block(ax, in, out, t);
}
}  // namespace
Kernels baseline_kernels() { return {vertical_base, horizontal_base}; }
}  // namespace kernels

namespace {

// Pillow's bicubic_filter, same evaluation order (a = -0.5).
double bicubic(double x) {
  const double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

constexpr int kPrecisionBits = kernels::kPrecisionBits;

// Rows per task: big enough that task hand-out is noise, small enough to balance 2..16 threads.
constexpr size_t kRowGrain = 8;

void for_rows(ThreadPool* pool, size_t rows, const std::function<void(size_t, size_t)>& fn) {
  if (pool && pool->size() > 1 && rows > kRowGrain) {
    pool->parallel_for(rows, fn, kRowGrain);
  } else {
    fn(0, rows);
  }
}

const kernels::Kernels& active_kernels() {
  static const kernels::Kernels k = [] {
#if defined(__x86_64__) || defined(_M_X64)
    if (cpu_features().avx512) return kernels::avx512_kernels();
    if (cpu_features().avx2_fma) return kernels::avx2_kernels();
#endif
    return kernels::baseline_kernels();
  }();
  return k;
}

kernels::AxisView view(const ResampleAxis& a) {
  return {a.in_size, a.out_size, a.ksize, a.first.data(), a.count.data(), a.coeffs.data()};
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
  const kernels::Kernels& kern = active_kernels();
  ResampleAxis vert;
  int ybox_first = 0, ybox_last = h;
  if (need_v) {
    vert = bicubic_axis(h, oh);
    ybox_first = vert.first[0];
    ybox_last = vert.first[oh - 1] + vert.count[oh - 1];
  }

  // Horizontal pass over source rows [ybox_first, ybox_last) into a uint8 temporary (or straight
  // into dst when there is no vertical pass), kRowBlock rows at a time.
  std::unique_ptr<uint8_t[]> tmp;  // uninitialised: every byte is written
  const uint8_t* vsrc = src;  // what the vertical pass reads, row 0 = source row ybox_first
  if (need_h) {
    const ResampleAxis hor = bicubic_axis(w, ow);
    const kernels::AxisView hv = view(hor);
    const int rows = ybox_last - ybox_first;
    uint8_t* out = dst;
    if (need_v) {
      tmp.reset(new uint8_t[size_t(rows) * ow * 3]);
      out = tmp.get();
    }
    const size_t in_stride = size_t(w) * 3, out_stride = size_t(ow) * 3;
    constexpr int B = kernels::kRowBlock;
    const size_t blocks = (size_t(rows) + B - 1) / B;
    auto run = [&](size_t b0, size_t b1) {
      std::vector<int32_t> t(size_t(w) * 3 * B);
      for (size_t b = b0; b < b1; ++b) {
        const uint8_t* in[B];
        uint8_t* o[B];
        for (int r = 0; r < B; ++r) {
          const size_t row = std::min(b * B + r, size_t(rows) - 1);  // padding rows repeat the last
          in[r] = src + (ybox_first + row) * in_stride;
          o[r] = b * B + r < size_t(rows) ? out + (b * B + r) * out_stride : nullptr;
        }
        kern.horizontal(hv, in, o, t.data());
      }
    };
    if (pool && pool->size() > 1 && blocks > 1) pool->parallel_for(blocks, run, 1);
    else run(0, blocks);
    vsrc = out;
  } else {
    vsrc = src + size_t(ybox_first) * w * 3;
  }
  if (!need_v) return;

  const kernels::AxisView vv = view(vert);
  const size_t row_elems = size_t(ow) * 3;
  for_rows(pool, size_t(oh), [&](size_t y0, size_t y1) {
    std::vector<int32_t> acc(row_elems);
    kern.vertical(vv, ybox_first, vsrc, row_elems, dst, y0, y1, acc.data());
  });
}

}  // namespace image
}  // namespace tessera
