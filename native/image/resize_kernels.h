// The inner loops of the Pillow resize, written so that compilers vectorise them: included by
// resize.cc (baseline ISA), resize_avx2.cc and resize_avx512.cc (compiled for those ISAs, chosen at
// run time). Integer arithmetic throughout, so every variant gives the same bytes as Pillow.
// Only C headers and plain pointers here: a C++ library inline function instantiated under an ISA
// pragma could be picked by the linker for the whole program.
#pragma once
#include <stddef.h>
#include <stdint.h>

namespace tessera::image::kernels {

// A ResampleAxis seen through plain pointers.
struct AxisView {
  int in_size, out_size, ksize;
  const int32_t* first;
  const int32_t* count;
  const int32_t* coeffs;
};

constexpr int kPrecisionBits = 22;  // Pillow's PRECISION_BITS for 8-bit images
constexpr int kRowBlock = 8;         // rows the horizontal pass carries per vector lane group

// Pillow's clip8: the accumulator carries 22 fractional bits and a +0.5 rounding bias.
__attribute__((always_inline)) inline uint8_t clip8(int32_t v) {
  if (v >= (1 << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecisionBits);
}

// Vertical pass for output rows [y0, y1): rows are `row_elems` bytes; out row yy reads input rows
// first[yy] - row_shift .. + count[yy]. acc: row_elems int32 scratch.
__attribute__((always_inline)) inline void vertical_rows(const AxisView& ax, int row_shift, const uint8_t* in,
                                                         size_t row_elems, uint8_t* out, size_t y0, size_t y1,
                                                         int32_t* __restrict acc) {
  for (size_t yy = y0; yy < y1; ++yy) {
    const int32_t* k = ax.coeffs + yy * ax.ksize;
    const int first = ax.first[yy] - row_shift, n = ax.count[yy];
    for (size_t e = 0; e < row_elems; ++e) acc[e] = int32_t(1) << (kPrecisionBits - 1);
    for (int y = 0; y < n; ++y) {
      const uint8_t* __restrict row = in + size_t(first + y) * row_elems;
      const int32_t c = k[y];
      for (size_t e = 0; e < row_elems; ++e) acc[e] += int32_t(row[e]) * c;
    }
    uint8_t* __restrict o = out + yy * row_elems;
    for (size_t e = 0; e < row_elems; ++e) o[e] = clip8(acc[e]);
  }
}

// Horizontal pass over kRowBlock rows at once: the block is transposed to t[x][c][r] (int32), so
// that one output pixel of all kRowBlock rows is 3 * kRowBlock lanes accumulating with the same
// coefficient. in: kRowBlock row pointers (padding rows may repeat a real row); out likewise,
// null for padding rows. t: w * 3 * kRowBlock int32 scratch.
__attribute__((always_inline)) inline void horizontal_block(const AxisView& ax, const uint8_t* const* in,
                                                            uint8_t* const* out, int32_t* __restrict t) {
  constexpr int L = 3 * kRowBlock;
  const int w = ax.in_size;
  for (int x = 0; x < w; ++x)
    for (int c = 0; c < 3; ++c)
      for (int r = 0; r < kRowBlock; ++r) t[size_t(x) * L + c * kRowBlock + r] = in[r][x * 3 + c];
  for (int xx = 0; xx < ax.out_size; ++xx) {
    const int32_t* k = ax.coeffs + size_t(xx) * ax.ksize;
    const int32_t* __restrict src = t + size_t(ax.first[xx]) * L;
    const int n = ax.count[xx];
    int32_t acc[L];
    for (int i = 0; i < L; ++i) acc[i] = int32_t(1) << (kPrecisionBits - 1);
    for (int j = 0; j < n; ++j) {
      const int32_t c = k[j];
      const int32_t* __restrict s = src + size_t(j) * L;
      for (int i = 0; i < L; ++i) acc[i] += s[i] * c;
    }
    for (int r = 0; r < kRowBlock; ++r) {
      if (!out[r]) continue;
      uint8_t* o = out[r] + xx * 3;
      o[0] = clip8(acc[r]);
      o[1] = clip8(acc[kRowBlock + r]);
      o[2] = clip8(acc[2 * kRowBlock + r]);
    }
  }
}

// One ISA's entry points (resize.cc picks a set with cpu_features()).
struct Kernels {
  void (*vertical)(const AxisView&, int, const uint8_t*, size_t, uint8_t*, size_t, size_t, int32_t*);
  void (*horizontal)(const AxisView&, const uint8_t* const*, uint8_t* const*, int32_t*);
};
Kernels baseline_kernels();
Kernels avx2_kernels();    // x86-64 only
Kernels avx512_kernels();  // x86-64 only

}  // namespace tessera::image::kernels
