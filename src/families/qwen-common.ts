// What the Qwen families share (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): where a checkpoint keeps the tower's
// tensors, and the image side: their images go through HF's Qwen2VLImageProcessor, so encodePixels takes HF's
// pixel_values and image_grid_thw, images are sized by a pixel-area budget (minPixels / maxPixels), and the
// preprocessor is the Qwen pipeline (src/image/) with the checkpoint's preprocessor_config.json.
import { z } from 'zod';
import { TesseraError } from '../errors.js';
import { parseQwenPreprocessConfig, planQwen, preprocessQwen } from '../image/index.js';
import { MAX_INT32, float32Array, positiveInt } from '../limits.js';
import type { Grid, GridTriple, PixelInput, QwenPixelInput } from '../options.js';
import type { Preprocessor } from '../prepare.js';
import type { TowerSpec } from '../spec/types.js';
import { checkGeometry } from './geometry.js';
import type { ReferenceInput, TowerFamily } from './family.js';

/** Where the tower's tensors sit in a checkpoint: transformers 5, older Hub layouts, a tower saved alone. @internal */
export const QWEN_PREFIXES = ['model.visual.', 'visual.', ''];

/** The sizing options: the resized image's pixel-area bounds. @internal */
export const QWEN_SIZING_KEYS = {
  minPixels: positiveInt.optional(),
  maxPixels: positiveInt.optional(),
};

const gridSide = z.number().int().min(1).max(MAX_INT32);
const GridSchema = z.union([z.object({ t: gridSide, h: gridSide, w: gridSide }).strict(), z.tuple([gridSide, gridSide, gridSide])]);

/** encodePixels' input: { pixelValues, grid } (one grid or one per image). @internal */
export const QWEN_PIXEL_INPUT = z.object({ pixelValues: float32Array, grid: z.union([GridSchema, z.array(GridSchema).min(1)]) }).strict();

/** One grid or a list, each { t, h, w } or [t, h, w] (sides already checked by the schema), as a list of { t, h, w }. @internal */
export function normaliseGrid(grid: QwenPixelInput['grid']): Grid[] {
  const list: (Grid | GridTriple)[] =
    Array.isArray(grid) && !(grid.length === 3 && grid.every((v) => typeof v === 'number')) ? (grid as (Grid | GridTriple)[]) : [grid as Grid];
  return list.map((g) => (Array.isArray(g) ? { t: g[0], h: g[1], w: g[2] } : { t: g.t, h: g.h, w: g.w }));
}

/** Each image's grid fits the tower: its rows and columns are whole merge windows (the processor makes no other). */
function checkQwenGrids(input: PixelInput, dims: Record<string, number>): void {
  const m = dims['merge_size'] ?? 1;
  normaliseGrid((input as QwenPixelInput).grid).forEach((g, i) => {
    if (g.h % m || g.w % m)
      throw new TesseraError(
        'ERR_INVALID_ARGUMENT',
        `encodePixels: grid ${i} (${g.t}, ${g.h}, ${g.w}) does not fit this tower: h and w must be multiples of its merge_size ${m}`,
      );
  });
}

function qwenPreprocessor(
  config: Record<string, unknown> | undefined,
  where: string,
  dims: Record<string, number>,
  tokensOf: (patches: number) => number,
): Preprocessor {
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

/** The pixel budget as a preprocessor_config.json states it (either spelling), for `tessera inspect`. */
function describeQwenSizing(_spec: TowerSpec, pre: Record<string, unknown> | undefined): string {
  const size = pre?.['size'] as { shortest_edge?: number; longest_edge?: number } | undefined;
  return `min ${pre?.['min_pixels'] ?? size?.shortest_edge ?? '?'} / max ${pre?.['max_pixels'] ?? size?.longest_edge ?? '?'} pixels`;
}

/** An HF reference's input: pixel_values (f32) and image_grid_thw (i64 [t, h, w]). */
function qwenReferenceInput(tensor: (name: string) => Uint8Array): ReferenceInput {
  const pixelValues = new Float32Array(tensor('pixel_values').slice().buffer);
  const [t, h, w] = Array.from(new BigInt64Array(tensor('image_grid_thw').slice().buffer), Number);
  const input: QwenPixelInput = { pixelValues, grid: { t: t!, h: h!, w: w! } };
  return { input, patches: t! * h! * w! };
}

/** The image side of a Qwen-processor family, as TowerFamily.images. @internal */
export const QWEN_IMAGES = {
  preprocessor: qwenPreprocessor,
  // Qwen's processor defaults are Qwen2-VL's; a checkpoint always states its own, and sizing by another
  // checkpoint's budget would be silently wrong: without a config only encodePixels works.
  defaultsSuffice: false,
  sizingKeys: QWEN_SIZING_KEYS,
  describeSizing: describeQwenSizing,
} satisfies TowerFamily['images'];

/** @internal */
export const QWEN_PIXEL_INPUTS = { schema: QWEN_PIXEL_INPUT, check: checkQwenGrids, fromReference: qwenReferenceInput } satisfies TowerFamily['pixelInput'];
