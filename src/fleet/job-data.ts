// What a fleet job's data may be: a plain interface for each job kind (what users read) and one zod
// schema for each (the check), held equal at compile time (src/type-equality.ts). The schemas are
// checked where the data enters (enqueueImages / enqueueGroups before anything is added, the worker
// before anything is done), with messages that name the field at fault in words. Job data comes
// from whoever can write to the queue, so nothing here trusts its shape: unknown keys (`__proto__`
// among them) are refused by name, a missing field is "missing", and a group too big to hold is
// refused in one line without reading its entries.
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { OUTPUT_DTYPES, OUTPUT_FORMATS, type OutputDtype, type OutputFormat } from '../bulk/index.js';
import { TesseraError } from '../errors.js';
import { SoftTokenBudgetSchema, type GemmaSoftTokenBudget } from '../image/config.js';
import { describeValue } from '../options.js';
import type { Assert, Equals, Flat } from '../type-equality.js';
import { defaultRel } from './job-output.js';
import { isHttpUrl } from './url-policy.js';

/** The BullMQ job names: one image per job, or a small group of images encoded together. */
export const IMAGE_JOB = 'encode-image';
export const GROUP_JOB = 'encode-group';

/** The most images one group job may carry: a group is held, encoded and retried as one. */
export const MAX_GROUP_IMAGES = 64;

/** The longest input a job may name: Linux's PATH_MAX for a path, and the same for a URL (no page URL comes near it). */
export const MAX_INPUT_LENGTH = 4096;

/**
 * What a job may ask for: the output format and the encode options that change the output. The
 * worker's tower checks the sizing keys against its family (a key of the other family fails the
 * job as ERR_INVALID_ARGUMENT).
 */
export interface JobOptions {
  /** What the worker writes for the image (`encode --format`). Default 'safetensors'. */
  format?: OutputFormat;
  /** What the float tensors are written in (`encode --out-dtype`). Default 'f32'. */
  outputDtype?: OutputDtype;
  /** Qwen towers: the resized image's pixel-area bounds. Default: the checkpoint's. */
  minPixels?: number;
  maxPixels?: number;
  /** Gemma 4 towers: the most soft tokens an image becomes (70, 140, 280, 560, 1120). Default: the checkpoint's. */
  maxSoftTokens?: GemmaSoftTokenBudget;
  /** Admission: refuse an image whose header declares more pixels. Default 100,000,000 (100 MP). */
  maxInputPixels?: number;
  /** Write every intermediate stage too. Default false. */
  stages?: boolean;
}

/** @internal */
export const JobOptionsSchema = z
  .object({
    format: z.enum(OUTPUT_FORMATS).optional(),
    outputDtype: z.enum(OUTPUT_DTYPES).optional(),
    minPixels: z.number().int().positive().optional(),
    maxPixels: z.number().int().positive().optional(),
    maxSoftTokens: SoftTokenBudgetSchema.optional(),
    maxInputPixels: z.number().int().positive().optional(),
    stages: z.boolean().optional(),
  })
  .strict();

type _JobOptionsAgree = Assert<Equals<z.input<typeof JobOptionsSchema>, JobOptions>>;

const noNul = (s: string) => !s.includes('\0');

/** An absolute path (on storage every worker mounts at the same place) or an http(s) URL. */
const InputSchema = z
  .string()
  .min(1, 'is empty')
  .max(MAX_INPUT_LENGTH, `is longer than ${MAX_INPUT_LENGTH} characters`)
  .refine(noNul, 'holds a NUL byte')
  .refine((s) => isHttpUrl(s) || isAbsolute(s), 'must be an absolute path or an http(s) URL');

/** Why `rel` cannot be an output path, or undefined when it can. */
function relProblem(rel: string): string | undefined {
  if (rel.includes('\0')) return 'holds a NUL byte';
  if (rel.startsWith('/') || rel.split('/').some((p) => p === '..' || p === '.' || p === '')) return 'must be a relative path without empty, . or .. segments';
  return undefined;
}

/**
 * The input's path relative to its input root, '/'-separated (src/bulk/inputs.ts): the worker
 * writes DIR/<rel, extension replaced> exactly as `encode --out-dir` does. Default: the input's
 * base name (a URL: its path), which must make an output path too.
 */
const RelSchema = z
  .string()
  .min(1, 'is empty')
  .max(MAX_INPUT_LENGTH, `is longer than ${MAX_INPUT_LENGTH} characters`)
  .superRefine((rel, ctx) => {
    const why = relProblem(rel);
    if (why) ctx.addIssue({ code: 'custom', message: why });
  })
  .optional();

/** The default rel of an input given without one must be an output path as well (a URL's %00). */
function checkDefaultRel(item: { input: string; rel?: string | undefined }, ctx: z.RefinementCtx, path: (string | number)[]): void {
  if (item.rel !== undefined) return;
  const why = relProblem(defaultRel(item.input));
  if (why) ctx.addIssue({ code: 'custom', path: [...path, 'input'], message: `gives the output path ${JSON.stringify(defaultRel(item.input))}, which ${why}; give the job a rel` });
}

/** One image's job (enqueueImages). */
export interface ImageJob {
  /** An absolute path (on storage every worker mounts at the same place) or an http(s) URL; at most MAX_INPUT_LENGTH characters. */
  input: string;
  /** Default: none (safetensors, the checkpoint's sizing). */
  options?: JobOptions;
  /**
   * The output's path under the worker's --out-dir, '/'-separated, extension replaced (as
   * `encode --out-dir` names it). Default: the input's base name (a URL: its path).
   */
  rel?: string;
}

/** An image of a group job: its input and, optionally, its output path (as ImageJob's). */
export interface GroupImage {
  input: string;
  rel?: string;
}

/** A group job (enqueueGroups): 1 to MAX_GROUP_IMAGES images with one set of options, encoded together. */
export interface GroupJob {
  inputs: GroupImage[];
  /** Default: none (safetensors, the checkpoint's sizing). */
  options?: JobOptions;
}

/** An image job as the worker holds it once checked: its options filled in. */
export interface ParsedImageJob extends ImageJob {
  options: JobOptions;
}

/** A group job as the worker holds it once checked: its options filled in. */
export interface ParsedGroupJob extends GroupJob {
  options: JobOptions;
}

const ImageJobSchema = z
  .object({
    input: InputSchema,
    options: JobOptionsSchema.default({}),
    rel: RelSchema,
  })
  .strict()
  .superRefine((job, ctx) => checkDefaultRel(job, ctx, []));

const GroupImageSchema = z.object({ input: InputSchema, rel: RelSchema }).strict();

/** A group job: up to MAX_GROUP_IMAGES images with one set of options, encoded together (encodeMany). */
const GroupJobSchema = z
  .object({
    // The count is checked before any entry: a group of 100,000 malformed entries is one refusal.
    inputs: z.array(z.unknown()).min(1, 'is empty').max(MAX_GROUP_IMAGES, `holds more than ${MAX_GROUP_IMAGES} images`).pipe(z.array(GroupImageSchema)),
    options: JobOptionsSchema.default({}),
  })
  .strict()
  .superRefine((job, ctx) => job.inputs.forEach((item, i) => checkDefaultRel(item, ctx, ['inputs', i])));

type _ImageJobAgrees = Assert<Equals<z.input<typeof ImageJobSchema>, ImageJob>>;
type _ParsedImageJobAgrees = Assert<Equals<z.output<typeof ImageJobSchema>, ParsedImageJob>>;
type _GroupImageAgrees = Assert<Equals<z.input<typeof GroupImageSchema>, GroupImage>>;
// `inputs` is counted before its entries are read (a pipe from unknown[]): its entries' type is the pipe's end.
type _GroupJobAgrees = Assert<Equals<Flat<Omit<z.input<typeof GroupJobSchema>, 'inputs'> & { inputs: z.input<typeof GroupImageSchema>[] }>, GroupJob>>;
type _ParsedGroupJobAgrees = Assert<Equals<z.output<typeof GroupJobSchema>, ParsedGroupJob>>;

/** The value at `path` in `data`, through own keys only. */
function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let v = data;
  for (const p of path) v = v !== null && typeof v === 'object' && Object.hasOwn(v, p) ? (v as Record<PropertyKey, unknown>)[p] : undefined;
  return v;
}

/** A zod issue as one sentence naming the field: `what: 'options.minPixels' must be ...`. */
function describeIssue(what: string, data: unknown, issue: z.core.$ZodIssue, known: readonly string[]): string {
  const field = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const where = field ? ` in '${field}'` : '';
    return `${what}: unknown key ${JSON.stringify(issue.keys[0])}${where}${field ? '' : `; a job's keys are ${known.join(', ')}`}`;
  }
  const got = valueAt(data, issue.path);
  if (!field) return `${what}: the job's data must be an object, not ${describeValue(data)}`;
  if (issue.code === 'invalid_type' && got === undefined) return `${what}: '${field}' is missing`;
  if (issue.code === 'invalid_type') return `${what}: '${field}' must be ${/^[aeiou]/.test(issue.expected) ? 'an' : 'a'} ${issue.expected}, not ${describeValue(got)}`;
  if (issue.code === 'too_big' && Array.isArray(got)) return `${what}: '${field}' ${issue.message} (it holds ${got.length})`;
  if (issue.code === 'custom' || issue.code === 'too_small' || issue.code === 'too_big') {
    const msg = issue.message.startsWith('Too') ? issue.message.replace(/^Too (small|big): expected \w+ to (be|have) /, 'must be ') : issue.message;
    return `${what}: '${field}' ${msg} (got ${describeValue(got)})`;
  }
  return `${what}: '${field}' ${issue.message.replace(/^Invalid input: /, '')} (got ${describeValue(got)})`;
}

function parseJob<S extends z.ZodType>(schema: S, data: unknown, what: string, known: readonly string[]): z.output<S> {
  const r = schema.safeParse(data);
  if (r.success) return r.data;
  // An unknown key first: it says more than the errors it may cause (a misspelt key's value is unchecked).
  const issue = r.error.issues.find((i) => i.code === 'unrecognized_keys') ?? r.error.issues[0]!;
  throw new TesseraError('ERR_INVALID_ARGUMENT', describeIssue(what, data, issue, known));
}

export function parseImageJob(data: unknown, what = 'fleet job'): ParsedImageJob {
  return parseJob(ImageJobSchema, data, what, ['input', 'rel', 'options']);
}

export function parseGroupJob(data: unknown, what = 'fleet group job'): ParsedGroupJob {
  return parseJob(GroupJobSchema, data, what, ['inputs', 'options']);
}

/**
 * The images a job names, for its failure's log line and manifest lines: the parsed inputs, or,
 * when its data does not parse (it may hold anything, 100,000 entries among them), the job alone.
 */
export function describeJobInputs(name: string, data: unknown, jobId: string): { input: string; inputs?: string[] } {
  try {
    if (name === GROUP_JOB) {
      const inputs = parseGroupJob(data).inputs.map((i) => i.input);
      return { input: inputs[0]!, inputs };
    }
    return { input: parseImageJob(data).input };
  } catch {
    return { input: `job ${jobId}` };
  }
}
