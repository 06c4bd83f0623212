// The public calls' arguments: VisionTower.open, encode / encodeBatch, encodePixels, preprocess and
// estimate. Each has a plain interface (what a user's TypeScript reads: the published .d.ts never
// mentions zod) and one zod schema (the run-time check), held equal by a compile-time assertion
// beside each pair (src/type-equality.ts). Unknown keys are refused with the closest known key
// ("did you mean"), keys of the other family are refused naming the family, types and ranges are
// checked and minPixels <= maxPixels. Every refusal is ERR_INVALID_ARGUMENT naming the option.
// The CLI turns its flags into these objects and checks them with the same schemas.
import { z } from 'zod';
import { TesseraError } from './errors.js';
import { ALL_SIZING_KEYS, familiesWithSizingKey, familyOf, REGISTRY, type AllSizingKeys } from './families/registry.js';
import type { GemmaSoftTokenBudget } from './image/config.js';
import { positiveInt } from './limits.js';
import type { Family } from './spec/types.js';
import type { Assert, Equals } from './type-equality.js';

export { MAX_INT32 } from './limits.js';

/** Where a tower runs (OpenOptions.backend). */
export const BACKENDS = ['auto', 'cpu', 'metal', 'metal-emulated'] as const;
export type Backend = (typeof BACKENDS)[number];
/** How a tower holds its weights (OpenOptions.residency; docs/design.md#residency). */
export const RESIDENCIES = ['auto', 'stream', 'mapped', 'resident'] as const;
export type Residency = (typeof RESIDENCIES)[number];
/**
 * What a tower computes in (OpenOptions.precision): 'bf16' is the CPU's bf16 linears (docs/bf16.md) and Metal's
 * bfloat activations and tiles (macOS 14 and later), 'f16' Metal's half activations and tiles
 * (docs/metal.md#half-precision). A backend without the path runs f32 and
 * `info.precision` says so. The addon's own list (`precisions`, native/addon/tower_core.h) is the same, checked by
 * test/api-precision.test.ts.
 */
export const PRECISIONS = ['f32', 'bf16', 'f16'] as const;
export type Precision = (typeof PRECISIONS)[number];

/** VisionTower.open's options. Every key is optional. */
export interface OpenOptions {
  /**
   * Where the tower runs. 'auto' (the default): Metal on macOS arm64 (the CPU, with a warning, on a
   * GPU before M1), else the CPU. 'metal-emulated': the Metal backend's kernels run by the MSL
   * emulator on the CPU, a development check available in a clone only (docs/metal-on-linux.md).
   * `tower.info.backend` says which runs.
   */
  backend?: Backend;
  /**
   * How the weights are held: 'resident' (every stage read once at open), 'stream' (`slots`
   * page-aligned slots of the largest stage, refilled from disk by a prefetch thread), 'mapped'
   * (views into mmapped files). Default 'auto': chosen from the tower's bytes, `memoryBudget` and
   * the free memory (README, "Memory"). All give bit-identical results.
   */
  residency?: Residency;
  /** 'stream' residency: how many stage-sized slots it keeps, 1 to 16. Default 2. */
  slots?: number;
  /**
   * Bytes the tower may use, in whole bytes. `auto` residency and batch splitting plan within it, and
   * an image whose predicted peak passes it is refused (ERR_IMAGE_TOO_LARGE) before any work.
   * Default: none (the machine's free memory bounds batches).
   */
  memoryBudget?: number;
  /** CPU threads, 0 to 1024. Default 0: all physical cores. */
  threads?: number;
  /**
   * What the tower computes in: 'f32' (exact, the default); 'bf16': on the CPU bf16 operands and f32 sums
   * where the CPU has bf16 units (AMX, AVX512-BF16, arm64 FEAT_BF16; docs/bf16.md), on Metal bfloat
   * activations and tiles with f32 sums (macOS 14 and later); 'f16': on Metal half activations and tiles
   * (docs/metal.md#half-precision). Elsewhere f32 runs; `tower.info.precision` says which ran.
   */
  precision?: Precision;
  /** Packed folders: check every stage's recorded SHA-256 before opening (README, "Memory"). Default false. */
  verify?: boolean;
}

/** @internal */
export const OpenOptionsSchema = z
  .object({
    backend: z.enum(BACKENDS).default('auto'),
    residency: z.enum(RESIDENCIES).default('auto'),
    slots: z.number().int().min(1).max(16).default(2),
    memoryBudget: positiveInt.optional(),
    threads: z.number().int().min(0).max(1024).default(0),
    precision: z.enum(PRECISIONS).default('f32'),
    verify: z.boolean().default(false),
  })
  .strict();

type _OpenOptionsAgree = Assert<Equals<z.input<typeof OpenOptionsSchema>, OpenOptions>>;

/** What onProgress receives, once per stage. */
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

/**
 * preprocess() and estimate(): how an image is sized and admitted. A tower takes its own family's
 * sizing keys (Qwen: minPixels / maxPixels; Gemma 4: maxSoftTokens) and refuses the other's by name.
 */
export interface PreprocessOptions {
  /** Qwen: the smallest pixel area an image is resized to. Default: preprocessor_config.json's (`size.shortest_edge`). */
  minPixels?: number;
  /** Qwen: the largest pixel area an image is resized to (at least minPixels). Default: preprocessor_config.json's (`size.longest_edge`). */
  maxPixels?: number;
  /** Gemma 4: the most soft tokens an image becomes, one of GEMMA_SOFT_TOKEN_BUDGETS (70, 140, 280, 560, 1120). Default: the checkpoint's (280 when it states none). */
  maxSoftTokens?: GemmaSoftTokenBudget;
  /** Admission: an image whose header declares more pixels is refused (ERR_IMAGE_TOO_LARGE) before it is decoded. Default 100,000,000 (100 MP). */
  maxInputPixels?: number;
}

/** encode(), encodeBatch() and encodePixels(): the sizing keys plus the run's own. */
export interface EncodeOptions extends PreprocessOptions {
  /** Return every intermediate stage (`result.stages`, `result.stageShapes`). Default false. */
  stages?: boolean;
  /** Aborts the call (ERR_ABORTED, with `signal.reason` as its cause); checked between stages. */
  signal?: AbortSignal;
  /** Called once per stage done. */
  onProgress?: (p: Progress) => void;
  /** Scan every stage for inf/NaN (ERR_NUMERIC naming the stage). Default true. */
  checkFinite?: boolean;
}

/** encodeMany(): encode()'s keys plus the group size. */
export interface EncodeManyOptions extends EncodeOptions {
  /** Images per group, 1 to MAX_BATCH (1024): a group is decoded together and passes every stage together. Default DEFAULT_BATCH (4). */
  batch?: number;
}

const ADMISSION_KEYS = {
  maxInputPixels: positiveInt.optional(),
};

const ENCODE_KEYS = {
  stages: z.boolean().optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'must be an AbortSignal').optional(),
  onProgress: z.custom<(p: Progress) => void>((v) => typeof v === 'function', 'must be a function').optional(),
  checkFinite: z.boolean().optional(),
};

/**
 * encodeMany's `batch`: the images read, decoded and passed through the tower together (block-major)
 * when the memory budget does not split them further; its default and its largest value.
 */
export const DEFAULT_BATCH = 4;
export const MAX_BATCH = 1024;

const BATCH_KEYS = {
  batch: z.number().int().min(1).max(MAX_BATCH).optional(),
};

// The schemas below with no family take every family's sizing keys (the registry's): the interfaces describe that object.
type KeysInput<K extends z.ZodRawShape> = z.input<z.ZodObject<K>>;
type _PreprocessOptionsAgree = Assert<Equals<KeysInput<AllSizingKeys & typeof ADMISSION_KEYS>, PreprocessOptions>>;
type _EncodeOptionsAgree = Assert<Equals<KeysInput<AllSizingKeys & typeof ADMISSION_KEYS & typeof ENCODE_KEYS>, EncodeOptions>>;
type _EncodeManyOptionsAgree = Assert<
  Equals<KeysInput<AllSizingKeys & typeof ADMISSION_KEYS & typeof ENCODE_KEYS & typeof BATCH_KEYS>, EncodeManyOptions>
>;

/** A tower's family's sizing keys; no family: every family's. */
const familyKeys = (family: Family | undefined): z.ZodRawShape => (family === undefined ? ALL_SIZING_KEYS : familyOf(family).images.sizingKeys);

const minNotAboveMax = (value: object, ctx: z.RefinementCtx) => {
  const o = value as PreprocessOptions;
  if (o.minPixels !== undefined && o.maxPixels !== undefined && o.minPixels > o.maxPixels)
    ctx.addIssue({ code: 'custom', path: ['minPixels'], message: `${o.minPixels} is above maxPixels ${o.maxPixels}` });
};

/** preprocess() and estimate(): the family's sizing keys and the admission limit (no family: both families' keys). @internal */
export function preprocessOptionsSchema(family?: Family) {
  return z
    .object({ ...familyKeys(family), ...ADMISSION_KEYS })
    .strict()
    .superRefine(minNotAboveMax);
}

/** encode(), encodeBatch() and encodePixels(): preprocessing keys plus the run's own. @internal */
export function encodeOptionsSchema(family?: Family) {
  return z
    .object({ ...familyKeys(family), ...ADMISSION_KEYS, ...ENCODE_KEYS })
    .strict()
    .superRefine(minNotAboveMax);
}

/** encodeMany(): encode()'s keys plus `batch`, the images per group (default DEFAULT_BATCH). @internal */
export function encodeManyOptionsSchema(family?: Family) {
  return z
    .object({ ...familyKeys(family), ...ADMISSION_KEYS, ...ENCODE_KEYS, ...BATCH_KEYS })
    .strict()
    .superRefine(minNotAboveMax);
}

/** What `--out-dir` writes per image (src/bulk/output-dir.ts, README "Output files"). */
export const OUTPUT_FORMATS = ['safetensors', 'npy', 'vllm', 'vllm-torch', 'vllm-encoder-cache', 'sglang'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The dtypes outputs' float tensors can be written in (--out-dtype; src/outputs/out-dtype.ts). */
export const OUTPUT_DTYPES = ['f32', 'bf16', 'f16'] as const;
export type OutputDtype = (typeof OUTPUT_DTYPES)[number];

/** Why a format cannot hold an output dtype, or undefined when it can. */
export function outputDtypeUnsupported(format: OutputFormat, dtype: OutputDtype): string | undefined {
  if (dtype === 'bf16' && (format === 'npy' || format === 'vllm'))
    return `numpy has no bfloat16 (the ${format === 'npy' ? 'npy files' : 'vllm format\'s base64 .npy tensors'} could not hold it): use --out-dtype f16, or --format ${format === 'npy' ? 'safetensors' : 'vllm-torch'}`;
  return undefined;
}

/** `tessera encode`'s bulk-output flags as the CLI holds them once checked (defaults filled in). */
export interface BulkOutputOptions {
  /** --out-dir: one output per image under this folder. */
  outDir?: string;
  /** --out: one safetensors file for the run. */
  out?: string;
  /** --format (with --out-dir). Default 'safetensors'. */
  format: OutputFormat;
  /** --out-dtype: what the float tensors are written in. Default 'f32'. */
  outputDtype: OutputDtype;
  /** --force: redo outputs that are up to date. Default false. */
  force: boolean;
  /** --hash-inputs: fingerprint inputs by SHA-256 as well as size and mtime. Default false. */
  hashInputs: boolean;
  /** --exclude: glob patterns of inputs to skip. Default none. */
  exclude: string[];
}

/** @internal */
export const BulkOutputOptionsSchema = z
  .object({
    outDir: z.string().min(1).optional(),
    out: z.string().min(1).optional(),
    format: z.enum(OUTPUT_FORMATS).default('safetensors'),
    outputDtype: z.enum(OUTPUT_DTYPES).default('f32'),
    force: z.boolean().default(false),
    hashInputs: z.boolean().default(false),
    exclude: z.array(z.string().min(1)).default([]),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.out !== undefined && o.outDir !== undefined) ctx.addIssue({ code: 'custom', path: ['outDir'], message: 'cannot be given with --out (one file for the run, or one per image)' });
    if (o.outDir === undefined && o.format !== 'safetensors') ctx.addIssue({ code: 'custom', path: ['format'], message: `'${o.format}' needs --out-dir (--out writes one safetensors file)` });
    if (o.outDir === undefined && o.force) ctx.addIssue({ code: 'custom', path: ['force'], message: 'needs --out-dir (it redoes outputs that are up to date)' });
    if (o.outDir === undefined && o.hashInputs) ctx.addIssue({ code: 'custom', path: ['hashInputs'], message: 'needs --out-dir' });
    const why = outputDtypeUnsupported(o.format, o.outputDtype);
    if (why) ctx.addIssue({ code: 'custom', path: ['outputDtype'], message: why });
  });

type _BulkOutputOptionsAgree = Assert<Equals<z.output<typeof BulkOutputOptionsSchema>, BulkOutputOptions>>;

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

/** Why an unknown key is refused when it is another family's sizing key: whose it is, and what this call takes instead. */
function otherFamilyKey(key: string, known: readonly string[]): string | undefined {
  const owners = familiesWithSizingKey(key);
  if (!owners.length || known.includes(key)) return undefined;
  const mine = Object.keys(ALL_SIZING_KEYS).filter((k) => known.includes(k));
  const labels = [...new Set(owners.map((f) => f.label))].join(' / ');
  return `${labels} option${mine.length ? ` (this tower sizes images by ${mine.join('/')})` : ''}`;
}

/**
 * Parses `value` with `schema`; a refusal is ERR_INVALID_ARGUMENT naming `call`, the option and
 * what is wrong with it (the first issue zod reports).
 * @internal
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
    const other = otherFamilyKey(key, known);
    if (other) throw new TesseraError('ERR_INVALID_ARGUMENT', `${call}: option '${key}' is a ${other}`);
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

/** A Qwen image's grid in patches: frames (t), rows (h) and columns (w), as HF's image_grid_thw row. */
export interface Grid {
  t: number;
  h: number;
  w: number;
}
/** A grid written as HF writes an image_grid_thw row: [t, h, w]. */
export type GridTriple = [t: number, h: number, w: number];

/** encodePixels' input for a Qwen tower: HF's pixel_values and image_grid_thw. */
export interface QwenPixelInput {
  /** The patch rows, as HF's processor returns them (copied when called). */
  pixelValues: Float32Array;
  /** One image's grid, or one per image whose rows pixelValues holds one after another; each side 1 to 2^31 - 1. */
  grid: Grid | GridTriple | (Grid | GridTriple)[];
}

/** encodePixels' input for a Gemma 4 tower: the unpadded patch rows and each row's (x, y). */
export interface GemmaPixelInput {
  /** The patch rows, padding left out (copied when called). */
  pixelValues: Float32Array;
  /** (x, y) of each patch row, interleaved: two entries per row. */
  positions: Int32Array;
  /** Several images at once: each image's row count, in order. Default: one image. */
  imageRows?: number[];
}

/** encodePixels' input: the tower family's own. */
export type PixelInput = QwenPixelInput | GemmaPixelInput;

/** encodePixels' input for the tower's family (its registry entry's schema). @internal */
export function pixelInputSchema(family: Family): z.ZodType<PixelInput> {
  return familyOf(family).pixelInput.schema;
}

// Every family's input schema takes one of the documented shapes, and together they take them all.
type _PixelInputAgrees = Assert<Equals<z.input<(typeof REGISTRY)[number]['pixelInput']['schema']>, PixelInput>>;

/** A model path: a non-empty string. */
export function parseModelPath(path: unknown): string {
  if (typeof path !== 'string' || path.length === 0)
    throw new TesseraError('ERR_INVALID_ARGUMENT', `VisionTower.open: the model path must be a non-empty string, not ${describeValue(path)}`);
  return path;
}
