// Permanent or transient: how a job's failure is retried (docs/fleet.md#failures). A permanent
// failure is about the job itself (its data, its image, its URL): retrying cannot help, so the job
// fails at once (BullMQ's UnrecoverableError). A transient one may pass (a disk, a network, a
// Redis, memory others hold): BullMQ retries it with the job's backoff.
//
// Two tables: every error code's class, and the causes that make an error permanent whatever
// code the layer below gave it (a name the filesystem can never hold is ERR_IO from the writer, but
// no retry will write it).
import { hostname } from 'node:os';
import { TesseraError, toTesseraError, type ErrorCode } from '../errors.js';
import { errnoOf } from '../io/io-error.js';
import { ExceedsMachineMemory } from '../tower.js';

export type FailureClass = 'permanent' | 'transient';

/** Every code's class. ERR_NUMERIC is permanent: the same image through the same weights overflows the same way every time. */
const CLASS_OF: Record<ErrorCode, FailureClass> = {
  ERR_IMAGE_DECODE: 'permanent',
  ERR_IMAGE_TOO_LARGE: 'permanent',
  ERR_IMAGE_ASPECT: 'permanent',
  ERR_INVALID_ARGUMENT: 'permanent',
  ERR_NUMERIC: 'permanent',
  ERR_IO: 'transient',
  ERR_OUT_OF_MEMORY: 'transient',
  ERR_GPU: 'transient',
  ERR_INTERNAL: 'transient',
  // A worker never aborts or closes its tower mid-job, nor opens a model per job; should one of
  // these reach a job, another attempt (maybe on another worker) is the right answer.
  ERR_ABORTED: 'transient',
  ERR_CLOSED: 'transient',
  ERR_BACKEND_UNAVAILABLE: 'transient',
  ERR_MODEL_NOT_FOUND: 'transient',
  ERR_MODEL_FORMAT: 'transient',
  ERR_CONFIG_INVALID: 'transient',
  ERR_TENSOR_MISSING: 'transient',
  ERR_TENSOR_SHAPE: 'transient',
  ERR_WEIGHTS_CORRUPT: 'transient',
};

export function isPermanent(code: ErrorCode): boolean {
  return CLASS_OF[code] === 'permanent';
}

/** The error and the errors it wraps (`cause`), outermost first. */
function chain(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < 8; e = (e as { cause?: unknown }).cause) out.push(e);
  return out;
}

/** Causes that make a failure permanent, with the code it is reported under. */
const PERMANENT_CAUSES: { test: (causes: unknown[]) => boolean; code: ErrorCode; why: string }[] = [
  // A file or folder name longer than the filesystem allows (NAME_MAX, PATH_MAX): no retry writes it.
  { test: (c) => c.some((e) => errnoOf(e) === 'ENAMETOOLONG'), code: 'ERR_INVALID_ARGUMENT', why: 'a name longer than the filesystem allows' },
  // A NUL byte in a path (the schema refuses it in job data; a path built from it would get here).
  { test: (c) => c.some((e) => errnoOf(e) === 'ERR_INVALID_ARG_VALUE' && /null bytes/.test(String((e as Error).message))), code: 'ERR_INVALID_ARGUMENT', why: 'a path with a NUL byte' },
  // Refused before allocation: more memory than this machine has, so no retry here can encode it.
  { test: (c) => c.some((e) => e instanceof ExceedsMachineMemory), code: 'ERR_IMAGE_TOO_LARGE', why: `more memory than ${hostname()} has` },
];

/** A job's failure as the TesseraError it is reported and classified by. */
export function jobFailure(e: unknown): TesseraError {
  const err = toTesseraError(e);
  const cause = PERMANENT_CAUSES.find((c) => c.test(chain(err)));
  if (!cause || cause.code === err.code) return err;
  return new TesseraError(cause.code, `${err.message} (${cause.why}: not retried)`, { cause: err });
}
