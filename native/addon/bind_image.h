// N-API bindings for image preprocessing (native/image): registered by addon.cc.
#pragma once
#include <napi.h>

namespace tessera::addon {

// Adds to exports:
//   imagePreprocess(pixels: TypedArray, opts) -> Promise<{ pixelValues, positions? }>
//     opts: { width, height, format ('rgb8' | 'gray16' | ... see image/convert.h), transparentColor?: [r, g, b],
//             targetWidth, targetHeight, layout: 'qwen' | 'gemma', patch, temporal?, merge?,
//             doRescale, rescaleFactor, doNormalize, mean: [3], std: [3], output: 'float32' | 'uint8' }
//     pixelValues: Float32Array (or Uint8Array for output 'uint8') of rows x rowLen values;
//     positions: Int32Array (x, y) pairs for layout 'gemma'.
//   imageResize(rgb: Uint8Array, width, height, targetWidth, targetHeight) -> Promise<Uint8Array>
//     the bare Pillow-exact bicubic resize of packed RGB8 (for tests and tools).
//   imageToRgb(pixels: TypedArray, { width, height, format, transparentColor? }) -> Promise<Uint8Array>
//     decoded pixels to packed RGB8 by PIL's convert("RGB") rules (image/convert.h).
// Work runs on a libuv worker; results land in JS-allocated ArrayBuffers; failures reject with an
// Error whose `code` is one of the codes of docs/design.md#errors.
void RegisterImage(Napi::Env env, Napi::Object exports);

}  // namespace tessera::addon
