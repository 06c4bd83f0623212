// File/buffer -> what HF's PIL-backend processor returns, for both families: decode (with
// admission), size (sizing.ts), then one native call that converts, resizes, rescales/normalises
// and patchifies off the JS thread.
import { performance } from 'node:perf_hooks';
import { TesseraError } from '../errors.js';
import type { GemmaPreprocessConfig, GemmaSoftTokenBudget, QwenPreprocessConfig } from './config.js';
import { decodeImage, type AdmissionOptions, type ImageInput } from './decode.js';
import { nativePreprocess, toRgb8, type NativePreprocessArgs } from './native.js';
import { QWEN_MAX_ASPECT, checkSoftTokenBudget, gemmaTargetSize, smartResize, type Size } from './sizing.js';

export interface QwenPreprocessOptions {
  /** Overrides size.shortest_edge (a pixel area). */
  minPixels?: number;
  /** Overrides size.longest_edge (a pixel area). */
  maxPixels?: number;
  /** Admission limit on the decoded image (width x height), default 100 MP. */
  maxInputPixels?: number;
}

export interface GemmaPreprocessOptions {
  /** Overrides max_soft_tokens: 70, 140, 280, 560 or 1120. */
  maxSoftTokens?: GemmaSoftTokenBudget;
  /** Admission limit on the decoded image (width x height), default 100 MP. */
  maxInputPixels?: number;
}

export interface WidthHeight {
  width: number;
  height: number;
}

export interface PreprocessTimings {
  /** Reading the file and decoding it (sharp). */
  decodeMs: number;
  /** Conversion, resize, rescale/normalise and patchify (native). */
  preprocessMs: number;
}

export interface QwenPlan {
  resized: WidthHeight;
  /** Patch grid: t = 1 for images. */
  grid: { t: number; h: number; w: number };
  /** Rows of pixelValues: t*h*w. */
  patches: number;
}

export interface QwenPreprocessResult<T extends Float32Array | Uint8Array = Float32Array> extends QwenPlan {
  /** Values per row (native/common/patch_layout.h: 3 * temporal_patch_size * patch_size²). */
  width: number;
  /** [patches, width] rows in merge-window order (docs/models/qwen-vision.md#token-order). */
  pixelValues: T;
  decoded: WidthHeight;
  timings: PreprocessTimings;
}

export interface GemmaPlan {
  resized: WidthHeight;
  /** Patch grid (rows h, columns w). */
  patchGrid: { h: number; w: number };
  /** Rows of pixelValues (unpadded): h*w. */
  patches: number;
  maxSoftTokens: number;
}

export interface GemmaPreprocessResult<T extends Float32Array | Uint8Array = Float32Array> extends GemmaPlan {
  /** Values per row (native/common/patch_layout.h: patch_size² * 3). */
  width: number;
  /** [patches, width] rows, row-major over the patch grid, elements (dy, dx, c); not padded. */
  pixelValues: T;
  /** (x, y) = (column, row) of each row's patch, as pairs. */
  positions: Int32Array;
  decoded: WidthHeight;
  timings: PreprocessTimings;
}

function checkPixels(name: string, v: number | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!(Number.isSafeInteger(v) && v > 0)) throw new TesseraError('ERR_INVALID_ARGUMENT', `${name} must be a positive integer, not ${v}`);
  return v;
}

/** Sizes for a decoded (upright) image of this size: no pixels touched. */
export function planQwen(decoded: WidthHeight, cfg: QwenPreprocessConfig, opts: QwenPreprocessOptions = {}): QwenPlan {
  const minPixels = checkPixels('minPixels', opts.minPixels) ?? cfg.minPixels;
  const maxPixels = checkPixels('maxPixels', opts.maxPixels) ?? cfg.maxPixels;
  // min > max is not refused (HF does not either): smart_resize tests the max bound first.
  const factor = cfg.patchSize * cfg.mergeSize;
  const size: Size = cfg.doResize
    ? smartResize(decoded.height, decoded.width, factor, minPixels, maxPixels)
    : { height: decoded.height, width: decoded.width };
  if (size.height % factor || size.width % factor) {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `with do_resize false the image must be a multiple of ${factor} px, not ${decoded.width}x${decoded.height}`);
  }
  const grid = { t: 1, h: size.height / cfg.patchSize, w: size.width / cfg.patchSize };
  return { resized: { width: size.width, height: size.height }, grid, patches: grid.t * grid.h * grid.w };
}

/** Sizes for a decoded (upright) image of this size: no pixels touched. */
export function planGemma(decoded: WidthHeight, cfg: GemmaPreprocessConfig, opts: GemmaPreprocessOptions = {}): GemmaPlan {
  const maxSoftTokens = opts.maxSoftTokens === undefined ? cfg.maxSoftTokens : checkSoftTokenBudget(opts.maxSoftTokens);
  const size: Size = cfg.doResize
    ? gemmaTargetSize(decoded.height, decoded.width, maxSoftTokens, cfg.patchSize, cfg.poolingKernelSize)
    : { height: decoded.height, width: decoded.width };
  const side = cfg.patchSize * cfg.poolingKernelSize;
  if (size.height % side || size.width % side) {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `with do_resize false the image must be a multiple of ${side} px, not ${decoded.width}x${decoded.height}`);
  }
  const patchGrid = { h: size.height / cfg.patchSize, w: size.width / cfg.patchSize };
  return { resized: { width: size.width, height: size.height }, patchGrid, patches: patchGrid.h * patchGrid.w, maxSoftTokens };
}

/** The settings both families' configs share: how the resized bytes become values. */
interface ValueSettings {
  doRescale: boolean;
  rescaleFactor: number;
  doNormalize: boolean;
  imageMean: [number, number, number];
  imageStd: [number, number, number];
}

/**
 * The pipeline both families share: check the options on a nominal size (before a possibly large
 * decode), decode with admission, size the upright image, then one native call that converts,
 * resizes, rescales/normalises and patchifies into `layout`.
 */
async function decodeAndPatchify<P extends { resized: WidthHeight }>(
  input: ImageInput,
  admission: { maxInputPixels?: number | undefined; maxAspect?: number },
  plan: (size: WidthHeight) => P,
  layout: Pick<NativePreprocessArgs, 'layout' | 'patch' | 'temporal' | 'merge'>,
  values: ValueSettings,
  output: 'float32' | 'uint8',
) {
  const t0 = performance.now();
  plan({ width: 1024, height: 1024 });
  const img = await decodeImage(input, admission);
  const t1 = performance.now();
  const p = plan(img);
  const r = await nativePreprocess(img.pixels, {
    width: img.width,
    height: img.height,
    format: img.pixelFormat,
    ...(img.transparentColor ? { transparentColor: img.transparentColor } : {}),
    targetWidth: p.resized.width,
    targetHeight: p.resized.height,
    ...layout,
    doRescale: values.doRescale,
    rescaleFactor: values.rescaleFactor,
    doNormalize: values.doNormalize,
    mean: values.imageMean,
    std: values.imageStd,
    output,
  });
  const t2 = performance.now();
  return {
    plan: p,
    native: r,
    decoded: { width: img.width, height: img.height },
    timings: { decodeMs: t1 - t0, preprocessMs: t2 - t1 },
  };
}

async function runQwen<T extends Float32Array | Uint8Array>(
  input: ImageInput,
  cfg: QwenPreprocessConfig,
  opts: QwenPreprocessOptions,
  output: 'float32' | 'uint8',
): Promise<QwenPreprocessResult<T>> {
  const r = await decodeAndPatchify(
    input,
    { maxInputPixels: opts.maxInputPixels, maxAspect: QWEN_MAX_ASPECT },
    (size) => planQwen(size, cfg, opts),
    { layout: 'qwen', patch: cfg.patchSize, temporal: cfg.temporalPatchSize, merge: cfg.mergeSize },
    cfg,
    output,
  );
  return { ...r.plan, width: r.native.cols, pixelValues: r.native.pixelValues as T, decoded: r.decoded, timings: r.timings };
}

async function runGemma<T extends Float32Array | Uint8Array>(
  input: ImageInput,
  cfg: GemmaPreprocessConfig,
  opts: GemmaPreprocessOptions,
  output: 'float32' | 'uint8',
): Promise<GemmaPreprocessResult<T>> {
  const r = await decodeAndPatchify(
    input,
    { maxInputPixels: opts.maxInputPixels },
    (size) => planGemma(size, cfg, opts),
    { layout: 'gemma', patch: cfg.patchSize },
    cfg,
    output,
  );
  if (!r.native.positions) throw new TesseraError('ERR_INTERNAL', 'image: native preprocessing returned no positions');
  return { ...r.plan, width: r.native.cols, pixelValues: r.native.pixelValues as T, positions: r.native.positions, decoded: r.decoded, timings: r.timings };
}

/** Qwen3.5 / Qwen3-VL: pixel_values [patches, 1536] and image_grid_thw, as HF's PIL backend. */
export function preprocessQwen(input: ImageInput, cfg: QwenPreprocessConfig, opts: QwenPreprocessOptions = {}): Promise<QwenPreprocessResult> {
  return runQwen<Float32Array>(input, cfg, opts, 'float32');
}

/** The same rows with rescale/normalise off: the uint8 pixels HF's processor starts from. */
export function preprocessQwenBytes(input: ImageInput, cfg: QwenPreprocessConfig, opts: QwenPreprocessOptions = {}): Promise<QwenPreprocessResult<Uint8Array>> {
  return runQwen<Uint8Array>(input, cfg, opts, 'uint8');
}

/** Gemma 4: unpadded pixel_values [patches, 768] in [0, 1] and (x, y) positions, as HF's PIL backend. */
export function preprocessGemma(input: ImageInput, cfg: GemmaPreprocessConfig, opts: GemmaPreprocessOptions = {}): Promise<GemmaPreprocessResult> {
  return runGemma<Float32Array>(input, cfg, opts, 'float32');
}

/** The same rows with rescale off: the uint8 pixels HF's processor starts from. */
export function preprocessGemmaBytes(input: ImageInput, cfg: GemmaPreprocessConfig, opts: GemmaPreprocessOptions = {}): Promise<GemmaPreprocessResult<Uint8Array>> {
  return runGemma<Uint8Array>(input, cfg, opts, 'uint8');
}

/**
 * The upright 8-bit RGB image HF's PIL path starts from (Image.open, exif_transpose,
 * convert("RGB")): packed rows, 3 bytes per pixel.
 */
export async function decodeRgb8(input: ImageInput, opts: AdmissionOptions = {}): Promise<{ rgb: Uint8Array } & WidthHeight> {
  const img = await decodeImage(input, opts);
  return { rgb: await toRgb8(img.pixels, img.width, img.height, img.pixelFormat, img.transparentColor), width: img.width, height: img.height };
}
