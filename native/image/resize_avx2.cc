// The resize inner loops compiled for AVX2 (chosen at run time by resize.cc).
#if defined(__x86_64__) || defined(_M_X64)
#pragma GCC target("avx2")
#include "image/resize_kernels.h"

namespace tessera::image::kernels {
namespace {
void vertical(const AxisView& ax, int shift, const uint8_t* in, size_t row_elems, uint8_t* out, size_t y0, size_t y1,
              int32_t* acc) {
  vertical_rows(ax, shift, in, row_elems, out, y0, y1, acc);
}
void horizontal(const AxisView& ax, const uint8_t* const* in, uint8_t* const* out, int32_t* t) {
  horizontal_block(ax, in, out, t);
}
}  // namespace
Kernels avx2_kernels() { return {vertical, horizontal}; }
}  // namespace tessera::image::kernels
#endif
