#include "image/patchify.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <string>

#include "common/error.h"
#include "common/patch_layout.h"
#include "common/thread_pool.h"

namespace tessera {
namespace image {

std::array<float, 768> build_lut(const Normalize& n) {
  std::array<float, 768> lut{};
  for (int c = 0; c < 3; ++c) {
    for (int u = 0; u < 256; ++u) {
      float v = n.do_rescale ? float(double(u) * n.rescale_factor) : float(u);
      if (n.do_normalize) {
        float d = v - n.mean[c];  // float - float: one f32 rounding, as numpy
        v = d / n.std[c];
      }
      lut[c * 256 + u] = v;
    }
  }
  return lut;
}

namespace {

// Identity "table" for the uint8 variants.
struct ByteValue {
  uint8_t operator()(int, uint8_t u) const { return u; }
};
struct LutValue {
  const float* lut;
  float operator()(int c, uint8_t u) const { return lut[c * 256 + u]; }
};

void rows_parallel(ThreadPool* pool, size_t rows, const std::function<void(size_t, size_t)>& fn) {
  if (pool && pool->size() > 1 && rows >= 64) pool->parallel_for(rows, fn, 16);
  else fn(0, rows);
}

void check_grid(int w, int h, int mult, const char* what) {
  if (w <= 0 || h <= 0 || mult <= 0 || w % mult || h % mult)
    fail(Code::InvalidArgument, std::string(what) + ": image " + std::to_string(w) + "x" + std::to_string(h) +
                                    " is not a positive multiple of " + std::to_string(mult));
}

template <typename T, typename Value>
void qwen_rows(const uint8_t* rgb, int w, int h, const QwenLayout& l, Value value, T* out, ThreadPool* pool) {
  const int P = l.patch, T_ = l.temporal, m = l.merge;
  check_grid(w, h, P * m, "patchify (qwen)");
  if (T_ <= 0) fail(Code::InvalidArgument, "patchify (qwen): temporal_patch_size must be positive");
  const int gh = h / P, gw = w / P;
  const size_t row_len = size_t(patch_row_width(kImageChannels, T_, P));
  const size_t frame = size_t(P) * P;
  rows_parallel(pool, size_t(gh) * gw, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const PatchAt at = merge_window_patch(int64_t(r), gw, m);
      const size_t py0 = size_t(at.row) * P, px0 = size_t(at.col) * P;
      T* row = out + r * row_len;
      for (int c = 0; c < 3; ++c) {
        T* dst0 = row + size_t(c) * T_ * frame;  // t = 0 block of channel c
        for (int y = 0; y < P; ++y) {
          const uint8_t* s = rgb + ((py0 + y) * size_t(w) + px0) * 3 + c;
          T* d = dst0 + size_t(y) * P;
          for (int x = 0; x < P; ++x) d[x] = value(c, s[x * 3]);
        }
        for (int t = 1; t < T_; ++t) std::copy(dst0, dst0 + frame, dst0 + t * frame);
      }
    }
  });
}

template <typename T, typename Value>
void gemma_rows(const uint8_t* rgb, int w, int h, int P, Value value, T* out, int32_t* pos, ThreadPool* pool) {
  check_grid(w, h, P, "patchify (gemma)");
  const int Hp = h / P, Wp = w / P;
  const size_t row_len = size_t(patch_row_width(kImageChannels, 1, P));
  rows_parallel(pool, size_t(Hp) * Wp, [&](size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; ++n) {
      const size_t pr = n / Wp, pc = n % Wp;
      T* row = out + n * row_len;
      for (int dy = 0; dy < P; ++dy) {
        const uint8_t* s = rgb + ((pr * P + dy) * size_t(w) + pc * P) * 3;
        T* d = row + size_t(dy) * P * 3;
        for (int i = 0; i < P * 3; ++i) d[i] = value(i % 3, s[i]);
      }
      if (pos) {
        pos[2 * n] = int32_t(pc);
        pos[2 * n + 1] = int32_t(pr);
      }
    }
  });
}

}  // namespace

void patchify_qwen(const uint8_t* rgb, int w, int h, const QwenLayout& l, const float* lut, float* out,
                   ThreadPool* pool) {
  qwen_rows(rgb, w, h, l, LutValue{lut}, out, pool);
}
void patchify_qwen(const uint8_t* rgb, int w, int h, const QwenLayout& l, uint8_t* out, ThreadPool* pool) {
  qwen_rows(rgb, w, h, l, ByteValue{}, out, pool);
}
void patchify_gemma(const uint8_t* rgb, int w, int h, int patch, const float* lut, float* out, int32_t* positions,
                    ThreadPool* pool) {
  gemma_rows(rgb, w, h, patch, LutValue{lut}, out, positions, pool);
}
void patchify_gemma(const uint8_t* rgb, int w, int h, int patch, uint8_t* out, int32_t* positions, ThreadPool* pool) {
  gemma_rows(rgb, w, h, patch, ByteValue{}, out, positions, pool);
}

}  // namespace image
}  // namespace tessera
