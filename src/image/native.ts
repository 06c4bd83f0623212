// The image half of the addon (native/addon/bind_image.h), typed.
import { addon } from '../native.js';
import { TesseraError, toTesseraError } from '../errors.js';
import type { PixelFormat } from './decode.js';

export interface NativePreprocessArgs {
  width: number;
  height: number;
  format: PixelFormat;
  transparentColor?: [number, number, number];
  targetWidth: number;
  targetHeight: number;
  layout: 'qwen' | 'gemma';
  patch: number;
  temporal?: number;
  merge?: number;
  doRescale: boolean;
  rescaleFactor: number;
  doNormalize: boolean;
  mean: [number, number, number];
  std: [number, number, number];
  output: 'float32' | 'uint8';
}

export interface NativePreprocessResult<T extends Float32Array | Uint8Array> {
  pixelValues: T;
  /** Values per row (the patch-row width). */
  cols: number;
  positions?: Int32Array;
}

interface ImageBindings {
  imagePreprocess(pixels: Uint8Array | Uint16Array, args: NativePreprocessArgs): Promise<NativePreprocessResult<Float32Array | Uint8Array>>;
  imageResize(rgb: Uint8Array, width: number, height: number, targetWidth: number, targetHeight: number): Promise<Uint8Array>;
  imageToRgb(
    pixels: Uint8Array | Uint16Array,
    args: { width: number; height: number; format: PixelFormat; transparentColor?: [number, number, number] },
  ): Promise<Uint8Array>;
}

function bindings(): ImageBindings {
  const a = addon() as unknown as Partial<ImageBindings>;
  if (typeof a.imagePreprocess !== 'function' || typeof a.imageResize !== 'function' || typeof a.imageToRgb !== 'function') {
    throw new TesseraError('ERR_BACKEND_UNAVAILABLE', 'the native addon was built without the image bindings: rebuild with npm install');
  }
  return a as ImageBindings;
}

export async function nativePreprocess(
  pixels: Uint8Array | Uint16Array,
  args: NativePreprocessArgs,
): Promise<NativePreprocessResult<Float32Array | Uint8Array>> {
  try {
    return await bindings().imagePreprocess(pixels, args);
  } catch (err) {
    throw toTesseraError(err);
  }
}

/** Pillow-exact bicubic resize of packed RGB8 (exported for tests and tools). */
export async function resizeRgb8(rgb: Uint8Array, width: number, height: number, targetWidth: number, targetHeight: number): Promise<Uint8Array> {
  try {
    return await bindings().imageResize(rgb, width, height, targetWidth, targetHeight);
  } catch (err) {
    throw toTesseraError(err);
  }
}

/** Decoded pixels to packed RGB8 by PIL's convert("RGB") rules. */
export async function toRgb8(
  pixels: Uint8Array | Uint16Array,
  width: number,
  height: number,
  format: PixelFormat,
  transparentColor?: [number, number, number],
): Promise<Uint8Array> {
  try {
    return await bindings().imageToRgb(pixels, { width, height, format, ...(transparentColor ? { transparentColor } : {}) });
  } catch (err) {
    throw toTesseraError(err);
  }
}
