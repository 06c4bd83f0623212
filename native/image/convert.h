// Decoded pixels -> 8-bit RGB, as PIL's Image.convert("RGB") does it after Pillow's own decoders
// (docs/models/qwen-vision.md#decode): alpha is dropped, never composited; gray is replicated; 16-bit gray
// (Pillow mode I;16) is clipped at 255; every other 16-bit layout keeps the high byte (Pillow opens
// 16-bit RGB/RGBA/LA PNGs through its ";16B" unpackers, which take the high byte); CMYK uses
// Pillow's cmyk2rgb formula.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {
class ThreadPool;
namespace image {

enum class PixelFormat {
  Gray8,       // 1 x u8
  GrayA8,      // 2 x u8
  RGB8,        // 3 x u8
  RGBA8,       // 4 x u8
  CMYK8,       // 4 x u8, not inverted (C=0 is no ink)
  Gray16,      // 1 x u16: clipped (PIL I;16 -> RGB)
  GrayA16,     // 2 x u16: high byte (PIL opens it as RGBA via LA;16B)
  RGB16,       // 3 x u16: high byte
  RGBA16,      // 4 x u16: high byte
};

// "gray8", "graya8", "rgb8", "rgba8", "cmyk8", "gray16", "graya16", "rgb16", "rgba16".
PixelFormat parse_pixel_format(const std::string& name);
int channels_of(PixelFormat f);
int bytes_per_sample(PixelFormat f);  // 1 or 2

// Converts w x h pixels of format f (samples in native byte order, rows packed) to RGB8 in dst.
// transparent_rgb (RGBA8 only, may be null): the colour PIL shows for fully transparent pixels of a
// palette image whose decoder (libvips for GIF) replaced them with transparent black — PIL's
// convert("RGB") of a P image shows the palette entry of the transparent index.
void to_rgb8(const void* src, PixelFormat f, int w, int h, uint8_t* dst, ThreadPool* pool,
             const uint8_t* transparent_rgb = nullptr);

}  // namespace image
}  // namespace tessera
