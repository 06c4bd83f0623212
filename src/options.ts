// The public calls' arguments, one zod schema per call: VisionTower.open, encode / encodeBatch,
// encodePixels, preprocess and estimate. Unknown keys are refused with the closest known key
// ("did you mean"), keys of the other family are refused naming the family, types and ranges are
// checked and minPixels <= maxPixels. Every refusal is ERR_INVALID_ARGUMENT naming the option.
// The CLI turns its flags into these objects and checks them with the same schemas.
import { z } from 'zod';
import { TesseraError } from './errors.js';
import { GEMMA_SOFT_TOKEN_BUDGETS, type GemmaSoftTokenBudget } from './image/config.js';
import type { Family } from './spec/types.js';

/** Largest value a grid side or a pixel count may take: it must survive the addon's int32. */
export const MAX_INT32 = 2 ** 31 - 1;

const positiveInt = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** Where a tower runs (OpenOptions.backend). */
export const BACKENDS = ['auto', 'cpu', 'metal', 'metal-emulated'] as const;
/** How a tower holds its weights (OpenOptions.residency; docs/design.md#residency). */
export const RESIDENCIES = ['auto', 'stream', 'mapped', 'resident'] as const;
/** What the CPU backend's linears compute in (OpenOptions.precision; docs/bf16.md). */
export const PRECISIONS = ['f32', 'bf16'] as const;
export type Precision = (typeof PRECISIONS)[number];

export const OpenOptionsSchema = z
  .object({
    backend: z.enum(BACKENDS).default('auto'),
    residency: z.enum(RESIDENCIES).default('auto'),
    slots: z.number().int().min(1).max(16).default(2),
    memoryBudget: positiveInt.optional(),
    threads: z.number().int().min(0).max(1024).default(0),
    /**
     * What the CPU backend's linears compute in: 'f32' (exact, the default) or 'bf16' (bf16 operands,
     * f32 sums) where the CPU has bf16 units (AMX, AVX512-BF16, arm64 FEAT_BF16); elsewhere f32 runs.
     * tower.info.precision says which ran (docs/bf16.md).
     */
    precision: z.enum(PRECISIONS).default('f32'),
    /** Packed folders: check each stage's recorded checksum (see README, "Integrity"). */
    verify: z.boolean().default(false),
  })
  .strict();

export type OpenOptions = z.input<typeof OpenOptionsSchema>;

const QWEN_KEYS = {
  /** Qwen: override the pixel-area bounds of preprocessor_config.json. */
  minPixels: positiveInt.optional(),
  maxPixels: positiveInt.optional(),
};
/** Gemma 4's soft-token budget: one of GEMMA_SOFT_TOKEN_BUDGETS, typed as that union. */
export const SoftTokenBudgetSchema = z
  .number()
  .refine((v): v is GemmaSoftTokenBudget => (GEMMA_SOFT_TOKEN_BUDGETS as readonly number[]).includes(v), `must be one of ${GEMMA_SOFT_TOKEN_BUDGETS.join(', ')}`);
const GEMMA_KEYS = {
  /** Gemma 4: 70, 140, 280, 560 or 1120. */
  maxSoftTokens: SoftTokenBudgetSchema.optional(),
};
const ADMISSION_KEYS = {
  /** Admission: refuse images whose header declares more pixels (default 100 MP). */
  maxInputPixels: positiveInt.optional(),
};

export interface Progress {
  /** Index of the first image of the chunk being encoded, and the number of images in the call. */
  image: number;
  images: number;
  /** Stages done (patch embedding, each block, each merger) and their total. */
  block: number;
  blocks: number;
  /** Wall time of the stage just done, in ms (waiting for its weights included). */
  ms: number;
}

const ENCODE_KEYS = {
  stages: z.boolean().optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal').optional(),
  onProgress: z.custom<(p: Progress) => void>((v) => typeof v === 'function', 'must be a function').optional(),
  /** Scan every stage for inf/NaN (ERR_NUMERIC). Default true. */
  checkFinite: z.boolean().optional(),
};

const familyKeys = (family: Family | undefined) =>
  family === 'gemma4' ? GEMMA_KEYS : family === undefined ? { ...QWEN_KEYS, ...GEMMA_KEYS } : QWEN_KEYS;

const minNotAboveMax = (value: object, ctx: z.RefinementCtx) => {
  const o = value as PreprocessOptions;
  if (o.minPixels !== undefined && o.maxPixels !== undefined && o.minPixels > o.maxPixels)
    ctx.addIssue({ code: 'custom', path: ['minPixels'], message: `${o.minPixels} is above maxPixels ${o.maxPixels}` });
};

/** preprocess() and estimate(): the family's sizing keys and the admission limit (no family: both families' keys). */
export function preprocessOptionsSchema(family?: Family) {
  return z
    .object({ ...familyKeys(family), ...ADMISSION_KEYS })
    .strict()
    .superRefine(minNotAboveMax);
}

/** encode(), encodeBatch() and encodePixels(): preprocessing keys plus the run's own. */
export function encodeOptionsSchema(family?: Family) {
  return z
    .object({ ...familyKeys(family), ...ADMISSION_KEYS, ...ENCODE_KEYS })
    .strict()
    .superRefine(minNotAboveMax);
}

/**
 * encodeMany's `batch`: the images read, decoded and passed through the tower together (block-major)
 * when the memory budget does not split them further; its default and its largest value.
 */
export const DEFAULT_BATCH = 4;
export const MAX_BATCH = 1024;

/** encodeMany(): encode()'s keys plus `batch`, the images per group (default DEFAULT_BATCH). */
export function encodeManyOptionsSchema(family?: Family) {
  return z
    .object({ ...familyKeys(family), ...ADMISSION_KEYS, ...ENCODE_KEYS, batch: z.number().int().min(1).max(MAX_BATCH).optional() })
    .strict()
    .superRefine(minNotAboveMax);
}

/** What `--out-dir` writes per image (src/bulk/output-dir.ts, README "Output files"). */
export const OUTPUT_FORMATS = ['safetensors', 'npy', 'vllm', 'vllm-torch', 'vllm-encoder-cache', 'sglang'] as const;

/** `tessera encode`'s bulk-output flags, as an object (the CLI checks its flags with this). */
export const BulkOutputOptionsSchema = z
  .object({
    outDir: z.string().min(1).optional(),
    out: z.string().min(1).optional(),
    format: z.enum(OUTPUT_FORMATS).default('safetensors'),
    force: z.boolean().default(false),
    /** Fingerprint inputs by SHA-256 as well as size and mtime. */
    hashInputs: z.boolean().default(false),
    exclude: z.array(z.string().min(1)).default([]),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.out !== undefined && o.outDir !== undefined) ctx.addIssue({ code: 'custom', path: ['outDir'], message: 'cannot be given with --out (one file for the run, or one per image)' });
    if (o.outDir === undefined && o.format !== 'safetensors') ctx.addIssue({ code: 'custom', path: ['format'], message: `'${o.format}' needs --out-dir (--out writes one safetensors file)` });
    if (o.outDir === undefined && o.force) ctx.addIssue({ code: 'custom', path: ['force'], message: 'needs --out-dir (it redoes outputs that are up to date)' });
    if (o.outDir === undefined && o.hashInputs) ctx.addIssue({ code: 'custom', path: ['hashInputs'], message: 'needs --out-dir' });
  });

export type BulkOutputOptions = z.output<typeof BulkOutputOptionsSchema>;

export interface PreprocessOptions {
  minPixels?: number;
  maxPixels?: number;
  /** Gemma 4: the most soft tokens an image becomes (70, 140, 280, 560 or 1120). */
  maxSoftTokens?: GemmaSoftTokenBudget;
  maxInputPixels?: number;
}

export interface EncodeOptions extends PreprocessOptions {
  stages?: boolean;
  signal?: AbortSignal;
  onProgress?: (p: Progress) => void;
  checkFinite?: boolean;
}

export interface EncodeManyOptions extends EncodeOptions {
  /** Images per group (default DEFAULT_BATCH, 4): a group is decoded together and passes every stage together. */
  batch?: number;
}

// ---- messages

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = row[j]!;
      row[j] = Math.min(up + 1, row[j - 1]! + 1, diag + (a[i - 1]!.toLowerCase() === b[j - 1]!.toLowerCase() ? 0 : 1));
      diag = up;
    }
  }
  return row[b.length]!;
}

/** The known key closest to `key`, if it is close enough to be a misspelling. */
export function closestKey(key: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = editDistance(key, k);
    if (d < bestD) (best = k), (bestD = d);
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(best.length / 3)) ? best : undefined;
}

export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v);
  if (typeof v === 'object' || typeof v === 'function') return `a ${typeof v}`;
  return String(v);
}

const OTHER_FAMILY: Record<string, string> = {
  maxSoftTokens: 'Gemma 4 option (Qwen towers size images by minPixels/maxPixels)',
  minPixels: 'Qwen option (Gemma 4 towers size images by maxSoftTokens)',
  maxPixels: 'Qwen option (Gemma 4 towers size images by maxSoftTokens)',
};

/**
 * Parses `value` with `schema`; a refusal is ERR_INVALID_ARGUMENT naming `call`, the option and
 * what is wrong with it (the first issue zod reports).
 */
export function parseArgument<S extends z.ZodType>(schema: S, value: unknown, call: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  // An unknown key says more than the type errors it may cause (a misspelt key's value is unchecked).
  const issue = r.error.issues.find((i) => i.code === 'unrecognized_keys') ?? r.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    const shape = (schema as unknown as { shape?: Record<string, unknown> }).shape;
    const known = shape ? Object.keys(shape) : [];
    // (own keys only: '__proto__' is a key a parsed JSON object may have, not a lookup of Object.prototype)
    if (Object.hasOwn(OTHER_FAMILY, key) && !known.includes(key))
      throw new TesseraError('ERR_INVALID_ARGUMENT', `${call}: option '${key}' is a ${OTHER_FAMILY[key]}`);
    const near = closestKey(key, known);
    throw new TesseraError(
      'ERR_INVALID_ARGUMENT',
      `${call}: unknown option '${key}'${near ? ` (did you mean '${near}'?)` : ''}; known options: ${known.join(', ')}`,
    );
  }
  const name = issue.path.length ? issue.path.join('.') : undefined;
  // An enum's refusal lists its values as words, not as zod's quoted alternatives.
  if (issue.code === 'invalid_value' && name) {
    let got: unknown = value;
    for (const p of issue.path) got = got === null || got === undefined ? undefined : (got as Record<PropertyKey, unknown>)[p as PropertyKey];
    throw new TesseraError('ERR_INVALID_ARGUMENT', `${call}: option '${name}' must be one of ${issue.values.map(String).join(', ')} (got ${describeValue(got)})`);
  }
  let got: unknown = value;
  for (const p of issue.path) got = got === null || got === undefined ? undefined : (got as Record<PropertyKey, unknown>)[p as PropertyKey];
  if (!name) throw new TesseraError('ERR_INVALID_ARGUMENT', `${call}: options must be an object, not ${describeValue(value)}`);
  throw new TesseraError('ERR_INVALID_ARGUMENT', `${call}: option '${name}' ${issue.message.replace(/^Invalid input: /, '')} (got ${describeValue(got)})`);
}

const gridSide = z.number().int().min(1).max(MAX_INT32);
const GridSchema = z.union([
  z.object({ t: gridSide, h: gridSide, w: gridSide }).strict(),
  z.tuple([gridSide, gridSide, gridSide]),
]);
const float32Array = z.custom<Float32Array>((v) => v instanceof Float32Array, 'must be a Float32Array');

/** encodePixels' input for the tower's family: Qwen { pixelValues, grid }, Gemma 4 { pixelValues, positions, imageRows? }. */
export function pixelInputSchema(family: Family) {
  if (family === 'gemma4')
    return z
      .object({
        pixelValues: float32Array,
        positions: z.custom<Int32Array>((v) => v instanceof Int32Array, 'must be an Int32Array'),
        imageRows: z.array(z.number().int().min(1).max(MAX_INT32)).min(1).optional(),
      })
      .strict();
  return z.object({ pixelValues: float32Array, grid: z.union([GridSchema, z.array(GridSchema).min(1)]) }).strict();
}

/** A model path: a non-empty string. */
export function parseModelPath(path: unknown): string {
  if (typeof path !== 'string' || path.length === 0)
    throw new TesseraError('ERR_INVALID_ARGUMENT', `VisionTower.open: the model path must be a non-empty string, not ${describeValue(path)}`);
  return path;
}
