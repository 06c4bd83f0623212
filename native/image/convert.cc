#include "image/convert.h"

#include <cstring>
#include <functional>

#include "common/error.h"
#include "common/thread_pool.h"

namespace tessera {
namespace image {

PixelFormat parse_pixel_format(const std::string& n) {
  if (n == "gray8") return PixelFormat::Gray8;
  if (n == "graya8") return PixelFormat::GrayA8;
  if (n == "rgb8") return PixelFormat::RGB8;
  if (n == "rgba8") return PixelFormat::RGBA8;
  if (n == "cmyk8") return PixelFormat::CMYK8;
  if (n == "gray16") return PixelFormat::Gray16;
  if (n == "graya16") return PixelFormat::GrayA16;
  if (n == "rgb16") return PixelFormat::RGB16;
  if (n == "rgba16") return PixelFormat::RGBA16;
  fail(Code::InvalidArgument, "unknown pixel format '" + n + "'");
}

int channels_of(PixelFormat f) {
  switch (f) {
    case PixelFormat::Gray8: case PixelFormat::Gray16: return 1;
    case PixelFormat::GrayA8: case PixelFormat::GrayA16: return 2;
    case PixelFormat::RGB8: case PixelFormat::RGB16: return 3;
    case PixelFormat::RGBA8: case PixelFormat::RGBA16: case PixelFormat::CMYK8: return 4;
  }
  return 0;
}

int bytes_per_sample(PixelFormat f) {
  switch (f) {
    case PixelFormat::Gray16: case PixelFormat::GrayA16: case PixelFormat::RGB16: case PixelFormat::RGBA16: return 2;
    default: return 1;
  }
}

namespace {

// Pillow's MULDIV255: a*b/255 rounded, in integers.
inline int muldiv255(int a, int b) {
  int tmp = a * b + 128;
  return ((tmp >> 8) + tmp) >> 8;
}
inline uint8_t clip8(int v) { return uint8_t(v < 0 ? 0 : v > 255 ? 255 : v); }

void convert_pixels(const void* src, PixelFormat f, size_t begin, size_t end, uint8_t* dst, const uint8_t* key) {
  const uint8_t* s8 = static_cast<const uint8_t*>(src);
  const uint16_t* s16 = static_cast<const uint16_t*>(src);
  const int ch = channels_of(f);
  uint8_t* o = dst + begin * 3;
  switch (f) {
    case PixelFormat::RGB8:
      std::memcpy(o, s8 + begin * 3, (end - begin) * 3);
      return;
    case PixelFormat::Gray8: case PixelFormat::GrayA8:
      for (size_t i = begin; i < end; ++i, o += 3) o[0] = o[1] = o[2] = s8[i * ch];
      return;
    case PixelFormat::RGBA8:
      for (size_t i = begin; i < end; ++i, o += 3) {
        const uint8_t* p = (key && s8[i * 4 + 3] == 0) ? key : s8 + i * 4;
        o[0] = p[0]; o[1] = p[1]; o[2] = p[2];
      }
      return;
    case PixelFormat::CMYK8:
      // Pillow Convert.c cmyk2rgb.
      for (size_t i = begin; i < end; ++i, o += 3) {
        const uint8_t* p = s8 + i * 4;
        int nk = 255 - p[3];
        o[0] = clip8(nk - muldiv255(p[0], nk));
        o[1] = clip8(nk - muldiv255(p[1], nk));
        o[2] = clip8(nk - muldiv255(p[2], nk));
      }
      return;
    case PixelFormat::Gray16:
      for (size_t i = begin; i < end; ++i, o += 3) {
        uint16_t v = s16[i];
        o[0] = o[1] = o[2] = uint8_t(v > 255 ? 255 : v);
      }
      return;
    case PixelFormat::GrayA16:
      for (size_t i = begin; i < end; ++i, o += 3) o[0] = o[1] = o[2] = uint8_t(s16[i * 2] >> 8);
      return;
    case PixelFormat::RGB16: case PixelFormat::RGBA16:
      for (size_t i = begin; i < end; ++i, o += 3) {
        const uint16_t* p = s16 + i * ch;
        o[0] = uint8_t(p[0] >> 8); o[1] = uint8_t(p[1] >> 8); o[2] = uint8_t(p[2] >> 8);
      }
      return;
  }
}

}  // namespace

void to_rgb8(const void* src, PixelFormat f, int w, int h, uint8_t* dst, ThreadPool* pool, const uint8_t* transparent_rgb) {
  const size_t n = size_t(w) * size_t(h);
  auto fn = [&](size_t b, size_t e) { convert_pixels(src, f, b, e, dst, transparent_rgb); };
  if (pool && pool->size() > 1 && n > (1u << 16)) pool->parallel_for(n, fn, 1u << 14);
  else fn(0, n);
}

}  // namespace image
}  // namespace tessera
