// tessera-vision/fleet: tessera as BullMQ workers on Redis (docs/fleet.md). A subpath of its own so
// that the library's main entry never loads BullMQ or ioredis.
export { createWorker, type FleetWorker, type FleetWorkerOptions, type FleetJobEvent } from './worker.js';
export { enqueueImages, enqueueGroups, type EnqueuedJob, type EnqueueOptions } from './enqueue.js';
export { waitForJobs, type WaitOutcome, type WaitProgress, type JobFailure } from './wait.js';
export { queueStatus, type QueueStatus } from './status.js';
export { connectRedis } from './connection.js';
export {
  IMAGE_JOB,
  GROUP_JOB,
  MAX_GROUP_IMAGES,
  jobIdOf,
  groupJobIdOf,
  jobAddOptions,
  isPermanent,
  codeOfReason,
  DEFAULT_ATTEMPTS,
  DEFAULT_BACKOFF_MS,
  type ImageJob,
  type ImageJobResult,
  type GroupJob,
  type GroupImage,
  type GroupJobResult,
  type GroupImageResult,
  type JobOptions,
  type WorkerSnapshot,
} from './job.js';
export { DEFAULT_MAX_FETCH_BYTES, DEFAULT_FETCH_TIMEOUT_MS, type FetchLimits } from './fetch-input.js';
