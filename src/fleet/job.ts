// What a fleet job is (docs/fleet.md#jobs): its data, its id, the retry policy it is added with, and
// how a failure is classified and recorded. Everything the enqueuer and the worker must agree on
// lives here.
import { createHash } from 'node:crypto';
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import { OUTPUT_FORMATS } from '../bulk/index.js';
import { ERROR_CODES, type ErrorCode, type TesseraError } from '../errors.js';
import { parseArgument } from '../options.js';
import { isHttpUrl } from './fetch-input.js';

/** The BullMQ job names: one image per job, or a small group of images encoded together. */
export const IMAGE_JOB = 'encode-image';
export const GROUP_JOB = 'encode-group';

/** The most images one group job may carry: a group is held, encoded and retried as one. */
export const MAX_GROUP_IMAGES = 64;

/**
 * What a job may ask for: the output format (`encode --format`; default safetensors) and the
 * encode options that change the output (the sizing keys of both families, admission, stages).
 * The worker's tower checks the encode options against its family (a wrong key fails the job as
 * ERR_INVALID_ARGUMENT).
 */
export const JobOptionsSchema = z
  .object({
    format: z.enum(OUTPUT_FORMATS).optional(),
    minPixels: z.number().int().positive().optional(),
    maxPixels: z.number().int().positive().optional(),
    maxSoftTokens: z.number().int().positive().optional(),
    maxInputPixels: z.number().int().positive().optional(),
    stages: z.boolean().optional(),
  })
  .strict();

export type JobOptions = z.infer<typeof JobOptionsSchema>;

/** An absolute path (on storage every worker mounts at the same place) or an http(s) URL. */
const InputSchema = z.string().min(1).refine((s) => isHttpUrl(s) || isAbsolute(s), 'must be an absolute path or an http(s) URL');

/**
 * The input's path relative to its input root, '/'-separated (src/bulk/inputs.ts): the worker
 * writes DIR/<rel, extension replaced> exactly as `encode --out-dir` does. Default: the input's
 * base name.
 */
const RelSchema = z
  .string()
  .min(1)
  .refine((s) => !s.startsWith('/') && !s.split('/').some((p) => p === '..' || p === '.' || p === ''), 'must be a relative path without . or .. segments')
  .optional();

export const ImageJobSchema = z
  .object({
    input: InputSchema,
    options: JobOptionsSchema.default({}),
    rel: RelSchema,
  })
  .strict();

/** A group job: up to MAX_GROUP_IMAGES images with one set of options, encoded together (encodeMany). */
export const GroupJobSchema = z
  .object({
    inputs: z.array(z.object({ input: InputSchema, rel: RelSchema }).strict()).min(1).max(MAX_GROUP_IMAGES),
    options: JobOptionsSchema.default({}),
  })
  .strict();

export type GroupJob = z.input<typeof GroupJobSchema>;
export type ParsedGroupJob = z.output<typeof GroupJobSchema>;

export function parseGroupJob(data: unknown): ParsedGroupJob {
  return parseArgument(GroupJobSchema, data, 'fleet group job');
}

export type ImageJob = z.input<typeof ImageJobSchema>;
export type ParsedImageJob = z.output<typeof ImageJobSchema>;

export function parseImageJob(data: unknown): ParsedImageJob {
  return parseArgument(ImageJobSchema, data, 'fleet job');
}

/** JSON with keys sorted at every level: the same object always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The job's id: a hash of its input, options and output path (rel). BullMQ keeps one job per id, so
 * enqueuing the same work again (while the job is kept in Redis) adds nothing. Not a number and
 * without ':' (BullMQ refuses both as custom ids).
 */
export function jobIdOf(job: ImageJob): string {
  const parsed = parseImageJob(job);
  const hash = createHash('sha256').update(canonical({ v: 1, input: parsed.input, options: parsed.options, rel: parsed.rel })).digest('hex');
  return `img-${hash.slice(0, 32)}`;
}

/**
 * A group job's id: a hash of its options and its images (input and rel), the images in a stable
 * order (sorted), so the same group enqueued again, in any order, adds nothing. `grp-`: never the
 * id of an image job.
 */
export function groupJobIdOf(job: GroupJob): string {
  const parsed = parseGroupJob(job);
  const images = parsed.inputs.map((i) => canonical({ input: i.input, rel: i.rel })).sort();
  const hash = createHash('sha256').update(canonical({ v: 1, images, options: parsed.options })).digest('hex');
  return `grp-${hash.slice(0, 32)}`;
}

/** Attempts and backoff a job is added with: transient failures retry after 1, 2, 4, 8 s. */
export const DEFAULT_ATTEMPTS = 5;
export const DEFAULT_BACKOFF_MS = 1000;

export function jobAddOptions(jobId: string, attempts = DEFAULT_ATTEMPTS, backoffMs = DEFAULT_BACKOFF_MS) {
  return {
    jobId,
    attempts,
    backoff: { type: 'exponential' as const, delay: backoffMs },
    // Completed and failed jobs stay (their ids are what makes a second enqueue a no-op, and
    // queue-status reads them); docs/fleet.md#redis-sizing says what they cost and how to trim.
    removeOnComplete: false,
    removeOnFail: false,
  };
}

/**
 * Errors about the input: retrying cannot help, so the job fails at once. ERR_NUMERIC is here too:
 * the same image through the same weights overflows the same way every time.
 */
export function isPermanent(code: ErrorCode): boolean {
  return code.startsWith('ERR_IMAGE_') || code === 'ERR_INVALID_ARGUMENT' || code === 'ERR_NUMERIC';
}

/** A job's failedReason: `CODE: message`, so that the code survives BullMQ's string-only record. */
export function failureReason(err: TesseraError): string {
  return `${err.code}: ${err.message}`;
}

/** The code of a failedReason written by failureReason (ERR_INTERNAL for anything else, e.g. a stalled-job failure). */
export function codeOfReason(reason: string | undefined): ErrorCode {
  const m = /^(ERR_[A-Z_]+): /.exec(reason ?? '');
  return m && (ERROR_CODES as readonly string[]).includes(m[1]!) ? (m[1] as ErrorCode) : 'ERR_INTERNAL';
}

/** What a completed job returns (BullMQ stores it as the job's returnvalue). */
export interface ImageJobResult {
  input: string;
  /** 'skipped': the output was already there with a matching record (an earlier run wrote it). */
  status: 'encoded' | 'skipped';
  /** The main output file, as the worker that wrote it sees it, and every file of the image. */
  output: string;
  files: string[];
  /** SHA-256 and size of the main output file's bytes. */
  sha256: string;
  bytes: number;
  tokens: number;
  width: number;
  timings: { fetchMs: number; decodeMs: number; preprocessMs: number; encodeMs: number; writeMs: number; totalMs: number };
  worker: WorkerSnapshot;
}

/** One image of a group job: written (or skipped, already up to date), or failed with its code. */
export type GroupImageResult =
  | (Omit<ImageJobResult, 'worker'> & { error?: undefined })
  | { input: string; status: 'failed'; error: { code: ErrorCode; message: string } };

/**
 * What a completed group job returns: every image, in the job's order. A group completes when each
 * image was written, skipped or failed with an input error (docs/fleet.md#group-jobs); `failed`
 * counts the last.
 */
export interface GroupJobResult {
  group: true;
  images: GroupImageResult[];
  encoded: number;
  skipped: number;
  failed: number;
  timings: { fetchMs: number; encodeMs: number; writeMs: number; totalMs: number };
  worker: WorkerSnapshot;
}

/** A worker's counters at a moment (in each job's progress and result, and in queue-status). */
export interface WorkerSnapshot {
  name: string;
  pid: number;
  host: string;
  /** Jobs completed and images encoded by this process. */
  jobs: number;
  images: number;
  /** Failed attempts by code (retried ones included). */
  failures: Partial<Record<ErrorCode, number>>;
  /** images / wall seconds from the start of this process's first job to the end of its last. */
  imagesPerSecond: number;
  /** Time spent in jobs (ms), and from the first job's start to the last one's end (ms). */
  busyMs: number;
  wallMs: number;
}
