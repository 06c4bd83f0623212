// What a fleet job is (docs/fleet.md#jobs): its data (schema: job-data.ts), its id, the retry policy it is added with, and
// how a failure is classified and recorded. Everything the enqueuer and the worker must agree on
// lives here.
import { createHash } from 'node:crypto';
import { ERROR_CODES, type ErrorCode, type TesseraError } from '../errors.js';
import { parseGroupJob, parseImageJob, type GroupJob, type ImageJob } from './job-data.js';

export {
  IMAGE_JOB,
  GROUP_JOB,
  MAX_GROUP_IMAGES,
  parseImageJob,
  parseGroupJob,
  type JobOptions,
  type ImageJob,
  type ParsedImageJob,
  type GroupJob,
  type GroupImage,
  type ParsedGroupJob,
} from './job-data.js';

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

/** Which failures are retried: src/fleet/failure-class.ts holds the table. */
export { isPermanent } from './failure-class.js';

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
