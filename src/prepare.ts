// Image → tower input, per family: the preprocessor a tower uses (its preprocessor_config.json,
// parsed once), and the one shape both families' inputs take on their way to the addon. How many
// tokens a number of patch rows makes is the tower's rule (the addon's sizing), passed in.
import { TesseraError } from './errors.js';
import {
  parseGemmaPreprocessConfig,
  parseQwenPreprocessConfig,
  planGemma,
  planQwen,
  preprocessGemma,
  preprocessQwen,
  readImageHeader,
  type ImageInput,
} from './image/index.js';
import type { PreprocessOptions } from './options.js';
import type { Family } from './spec/types.js';

export type { PreprocessOptions };


export interface Prepared {
  pixelValues: Float32Array;
  /** Qwen: the patch grid (t = 1). */
  grid?: { t: number; h: number; w: number };
  /** Gemma 4: (x, y) per patch row. */
  positions?: Int32Array;
  /** Patch rows, and embedding rows the tower will return for them. */
  patches: number;
  tokens: number;
  decoded: { width: number; height: number };
  resized: { width: number; height: number };
  timings: { decodeMs: number; preprocessMs: number };
}

export interface Plan {
  resized: { width: number; height: number };
  grid?: { t: number; h: number; w: number };
  patches: number;
  tokens: number;
}

export interface Preprocessor {
  /** Sizes for an upright image of this size, no pixels touched. */
  plan(size: { width: number; height: number }, opts: PreprocessOptions): Plan;
  run(input: ImageInput, opts: PreprocessOptions): Promise<Prepared>;
}

/**
 * The preprocessor's patch geometry must be the tower's: pixel rows cut for another patch size,
 * temporal depth or merge window would be refused much later as a pixel count or grid that does
 * not fit, blaming the image. Refused here, naming both settings.
 */
function checkGeometry(where: string, pairs: [string, number, string, number | undefined][]): void {
  for (const [preKey, pre, towerKey, tower] of pairs)
    if (tower !== undefined && pre !== tower)
      throw new TesseraError(
        'ERR_CONFIG_INVALID',
        `${where}: the preprocessor config's ${preKey} ${pre} contradicts the tower's ${towerKey} ${tower}: the tower could not take its pixel rows`,
      );
}

/**
 * `dims`: the tower's (TowerSpec.dims), checked against the preprocessor's patch geometry;
 * `tokensOf`: the tower's output rows for that many patch rows (the addon's sizing). Checking a
 * config alone (dims only) needs no tokensOf until plan or run is called.
 */
export function makePreprocessor(
  family: Family,
  config: Record<string, unknown> | undefined,
  where: string,
  dims: Record<string, number> = {},
  tokensOf: (patches: number) => number = () => {
    throw new TesseraError('ERR_INTERNAL', `${where}: a preprocessor made without the tower's sizing cannot count tokens`);
  },
): Preprocessor {
  if (family === 'gemma4') {
    const cfg = parseGemmaPreprocessConfig(config ?? {}, `${where} (preprocessor config)`);
    checkGeometry(where, [
      ['patch_size', cfg.patchSize, 'patch_size', dims['patch_size']],
      ['pooling_kernel_size', cfg.poolingKernelSize, 'pooling_kernel_size', dims['pooling_kernel']],
    ]);
    return {
      plan: (size, opts) => {
        const p = planGemma(size, cfg, opts);
        return { resized: p.resized, patches: p.patches, tokens: tokensOf(p.patches) };
      },
      run: async (input, opts) => {
        const r = await preprocessGemma(input, cfg, opts);
        return { pixelValues: r.pixelValues, positions: r.positions, patches: r.patches, tokens: tokensOf(r.patches), decoded: r.decoded, resized: r.resized, timings: r.timings };
      },
    };
  }
  if (!config) throw new TesseraError('ERR_MODEL_NOT_FOUND', `${where}: no preprocessor_config.json (needed to size images)`);
  const cfg = parseQwenPreprocessConfig(config, `${where} (preprocessor config)`);
  checkGeometry(where, [
    ['patch_size', cfg.patchSize, 'patch_size', dims['patch_size']],
    ['temporal_patch_size', cfg.temporalPatchSize, 'temporal_patch_size', dims['temporal_patch_size']],
    ['merge_size', cfg.mergeSize, 'spatial_merge_size', dims['merge_size']],
  ]);
  return {
    plan: (size, opts) => {
      const p = planQwen(size, cfg, opts);
      return { resized: p.resized, grid: p.grid, patches: p.patches, tokens: tokensOf(p.patches) };
    },
    run: async (input, opts) => {
      const r = await preprocessQwen(input, cfg, opts);
      return { pixelValues: r.pixelValues, grid: r.grid, patches: r.patches, tokens: tokensOf(r.patches), decoded: r.decoded, resized: r.resized, timings: r.timings };
    },
  };
}

/** An image's upright size from its header alone (EXIF orientation applied), for estimates. */
export async function headerSize(input: ImageInput, maxInputPixels?: number): Promise<{ width: number; height: number }> {
  const h = await readImageHeader(input, maxInputPixels === undefined ? {} : { maxInputPixels });
  return { width: h.width, height: h.height };
}
