// preprocessor_config.json of both families, parsed with zod into the normalised settings the
// preprocessing pipeline reads. Absent keys take the HF image-processor class defaults
// (docs/models/qwen-vision.md#preprocessor_configjson, docs/models/gemma4-vision.md#processor-config), never a checkpoint's values: a file that
// omits a key gets what HF would use for it.
import { z } from 'zod';
import { TesseraError } from '../errors.js';
import type { Assert, Equals } from '../type-equality.js';

/** 1/255 as HF writes it: the double nearest to 1/255. */
export const RESCALE_1_255 = 0.00392156862745098;

const OPENAI_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073] as const;
const OPENAI_CLIP_STD = [0.26862954, 0.26130258, 0.27577711] as const;

/** preprocessor_config.json as every Qwen3-VL and Qwen3.5 checkpoint ships it (docs/models/qwen-vision.md#preprocessor_configjson). */
export const QWEN_HUB_PREPROCESSOR_CONFIG = {
  size: { longest_edge: 16777216, shortest_edge: 65536 },
  patch_size: 16,
  temporal_patch_size: 2,
  merge_size: 2,
  image_mean: [0.5, 0.5, 0.5],
  image_std: [0.5, 0.5, 0.5],
  processor_class: 'Qwen3VLProcessor',
  image_processor_type: 'Qwen2VLImageProcessorFast',
} as const;

/** Gemma 4 accepts exactly these soft-token budgets (anything else raises in HF). */
export const GEMMA_SOFT_TOKEN_BUDGETS = [70, 140, 280, 560, 1120] as const;
/** A soft-token budget Gemma 4 accepts: one of GEMMA_SOFT_TOKEN_BUDGETS. */
export type GemmaSoftTokenBudget = (typeof GEMMA_SOFT_TOKEN_BUDGETS)[number];
/**
 * A soft-token budget: one of GEMMA_SOFT_TOKEN_BUDGETS, typed as that union on both sides (the
 * options' maxSoftTokens, a job's, preprocessor_config.json's max_soft_tokens).
 * @internal
 */
export const SoftTokenBudgetSchema = z.custom<GemmaSoftTokenBudget>(
  (v) => (GEMMA_SOFT_TOKEN_BUDGETS as readonly unknown[]).includes(v),
  `must be one of ${GEMMA_SOFT_TOKEN_BUDGETS.join(', ')}`,
);

const positiveInt = z.number().int().positive();
const triple = z.tuple([z.number().finite(), z.number().finite(), z.number().finite()]);
const nonZeroTriple = z.tuple([
  z.number().finite().refine((v) => v !== 0, 'must not be 0'),
  z.number().finite().refine((v) => v !== 0, 'must not be 0'),
  z.number().finite().refine((v) => v !== 0, 'must not be 0'),
]);
/** PIL's resample code for BICUBIC: the only one implemented, and every checkpoint of both families uses it. */
export const PIL_BICUBIC = 3;
const bicubicOnly = z
  .number()
  .int()
  .refine((v): v is typeof PIL_BICUBIC => v === PIL_BICUBIC, `only ${PIL_BICUBIC} (PIL BICUBIC) is supported`);

/** A Qwen preprocessor_config.json normalised: what the Qwen image pipeline reads. */
export interface QwenPreprocessConfig {
  /** Side of a square patch, in pixels (class default 14; every checkpoint says 16). */
  patchSize: number;
  /** Frames per patch: a still image is repeated this many times (2). */
  temporalPatchSize: number;
  /** Patches merged per side into one output token (2). */
  mergeSize: number;
  /** The resized image's pixel-area bounds (`size.shortest_edge` / `size.longest_edge`, or the legacy `min_pixels` / `max_pixels`). */
  minPixels: number;
  maxPixels: number;
  /** Per-channel mean and standard deviation of the normalisation (class default OpenAI CLIP's). */
  imageMean: [number, number, number];
  imageStd: [number, number, number];
  doResize: boolean;
  /** PIL's resample code: PIL_BICUBIC (3), the only one implemented. */
  resample: typeof PIL_BICUBIC;
  doRescale: boolean;
  /** The rescale factor, 1/255 by default. */
  rescaleFactor: number;
  doNormalize: boolean;
  doConvertRgb: boolean;
}

/**
 * Qwen2-VL image processor family (Qwen3-VL, Qwen3.5). Class defaults are Qwen2-VL's (patch 14,
 * min 3136, max 1003520, OpenAI-CLIP statistics); real checkpoints override them all.
 * `size.shortest_edge` / `size.longest_edge` are pixel AREAS (min/max pixels); legacy top-level
 * `min_pixels` / `max_pixels` overwrite them as in HF.
 */
const QwenPreprocessConfigSchema = z
  .object({
    size: z
      .object({ shortest_edge: positiveInt.optional(), longest_edge: positiveInt.optional() })
      .passthrough()
      .optional(),
    min_pixels: positiveInt.nullish(),
    max_pixels: positiveInt.nullish(),
    patch_size: positiveInt.default(14),
    temporal_patch_size: positiveInt.default(2),
    merge_size: positiveInt.default(2),
    image_mean: triple.default([...OPENAI_CLIP_MEAN]),
    image_std: nonZeroTriple.default([...OPENAI_CLIP_STD]),
    do_resize: z.boolean().default(true),
    resample: bicubicOnly.default(PIL_BICUBIC),
    do_rescale: z.boolean().default(true),
    rescale_factor: z.number().finite().positive().default(RESCALE_1_255),
    do_normalize: z.boolean().default(true),
    do_convert_rgb: z.boolean().default(true),
  })
  .passthrough()
  .transform((c, ctx) => {
    const min = c.min_pixels != null ? { v: c.min_pixels, key: 'min_pixels' } : { v: c.size?.shortest_edge ?? 56 * 56, key: 'size.shortest_edge' };
    const max = c.max_pixels != null ? { v: c.max_pixels, key: 'max_pixels' } : { v: c.size?.longest_edge ?? 28 * 28 * 1280, key: 'size.longest_edge' };
    // HF would not refuse this, but smart_resize then honours only the maximum: a file whose
    // bounds contradict each other says nothing about the size its author meant.
    if (min.v > max.v)
      ctx.addIssue({ code: 'custom', path: min.key.split('.'), message: `${min.v} is above ${max.key} ${max.v}: the pixel bounds contradict each other` });
    return { ...c, minPixels: min.v, maxPixels: max.v };
  })
  .transform((c) => ({
    patchSize: c.patch_size,
    temporalPatchSize: c.temporal_patch_size,
    mergeSize: c.merge_size,
    minPixels: c.minPixels,
    maxPixels: c.maxPixels,
    imageMean: c.image_mean as [number, number, number],
    imageStd: c.image_std as [number, number, number],
    doResize: c.do_resize,
    resample: c.resample,
    doRescale: c.do_rescale,
    rescaleFactor: c.rescale_factor,
    doNormalize: c.do_normalize,
    doConvertRgb: c.do_convert_rgb,
  }));

type _QwenPreprocessConfigAgrees = Assert<Equals<z.output<typeof QwenPreprocessConfigSchema>, QwenPreprocessConfig>>;

/** Gemma 4's image-processor settings normalised: what the Gemma image pipeline reads. */
export interface GemmaPreprocessConfig {
  /** Side of a square patch, in pixels (16). */
  patchSize: number;
  /** The checkpoint's soft-token budget: what an image becomes at most unless maxSoftTokens says otherwise (280). */
  maxSoftTokens: GemmaSoftTokenBudget;
  /** Patches pooled per side into one soft token (3). */
  poolingKernelSize: number;
  doResize: boolean;
  /** PIL's resample code: PIL_BICUBIC (3), the only one implemented. */
  resample: typeof PIL_BICUBIC;
  doRescale: boolean;
  /** The rescale factor, 1/255 by default. */
  rescaleFactor: number;
  /** Gemma 4 does not normalise by default (pixels stay in [0, 1]). */
  doNormalize: boolean;
  imageMean: [number, number, number];
  imageStd: [number, number, number];
  doConvertRgb: boolean;
}

/**
 * Gemma 4 image processor. Defaults are the 5.17 class's (which the hub files repeat): patch 16,
 * 280 soft tokens, 3x3 pooling, rescale to [0, 1], no normalisation.
 */
const GemmaPreprocessConfigSchema = z
  .object({
    patch_size: positiveInt.default(16),
    max_soft_tokens: SoftTokenBudgetSchema.default(280),
    pooling_kernel_size: positiveInt.default(3),
    do_resize: z.boolean().default(true),
    resample: bicubicOnly.default(PIL_BICUBIC),
    do_rescale: z.boolean().default(true),
    rescale_factor: z.number().finite().positive().default(RESCALE_1_255),
    do_normalize: z.boolean().default(false),
    image_mean: triple.default([0, 0, 0]),
    image_std: nonZeroTriple.default([1, 1, 1]),
    do_convert_rgb: z.boolean().default(true),
  })
  .passthrough()
  .transform((c) => ({
    patchSize: c.patch_size,
    maxSoftTokens: c.max_soft_tokens,
    poolingKernelSize: c.pooling_kernel_size,
    doResize: c.do_resize,
    resample: c.resample,
    doRescale: c.do_rescale,
    rescaleFactor: c.rescale_factor,
    doNormalize: c.do_normalize,
    imageMean: c.image_mean as [number, number, number],
    imageStd: c.image_std as [number, number, number],
    doConvertRgb: c.do_convert_rgb,
  }));

type _GemmaPreprocessConfigAgrees = Assert<Equals<z.output<typeof GemmaPreprocessConfigSchema>, GemmaPreprocessConfig>>;

function parseWith<S extends z.ZodType>(schema: S, json: unknown, source: string): z.output<S> {
  const r = schema.safeParse(json ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const field = issue.path.length ? issue.path.join('.') : '(root)';
  throw new TesseraError('ERR_CONFIG_INVALID', `${source}: field '${field}': ${issue.message}`);
}

/** Parses a Qwen preprocessor_config.json object (absent or {}: class defaults). */
export function parseQwenPreprocessConfig(json: unknown, source = 'preprocessor_config.json'): QwenPreprocessConfig {
  return parseWith(QwenPreprocessConfigSchema, json, source);
}

/**
 * Parses Gemma 4's image-processor settings (absent or {}: class defaults). A hub
 * processor_config.json's `image_processor` section is taken out by the folder reader
 * (formats/hf-folder.ts), so this always sees the flat settings.
 */
export function parseGemmaPreprocessConfig(json: unknown, source = 'preprocessor_config.json'): GemmaPreprocessConfig {
  return parseWith(GemmaPreprocessConfigSchema, json, source);
}
