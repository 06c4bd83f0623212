// createWorker: a BullMQ Worker that encodes image jobs with one tower (docs/fleet.md). One job at a
// time (concurrency 1): the native code already spreads one encode over every core, so a second
// job in the same process would only compete with the first. The tower is opened once, when the
// worker is created, and closed with it. Each job's images go through the one bulk runner and the
// --out-dir writer (src/bulk/, via group-job.ts), so they are `tessera encode --out-dir`'s files
// byte for byte; an output already there with a matching record is not redone. DIR/manifest.jsonl gets one line per finished job, appended
// after Redis has recorded the outcome.
//
// Failures (src/fleet/job.ts): errors about the input fail the job at once (UnrecoverableError);
// the rest are thrown as plain errors, which BullMQ retries with the job's backoff. A worker that
// dies mid-job holds a lock that stops being renewed; BullMQ's stalled-job check of any other
// worker puts the job back in the queue. close() lets the job in hand finish first.
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { TesseraError, type ErrorCode } from '../errors.js';
import { VisionTower, type OpenOptions } from '../tower.js';
import { tesseraVersion } from '../version.js';
import { connectRedis } from './connection.js';
import { isLastingReplyError, redisFailure } from './redis-errors.js';
import { jobFailure } from './failure-class.js';
import { describeJobInputs } from './job-data.js';
import { guardJobDecoding, type MalformedJobs } from './malformed-jobs.js';
import { checkQueueName } from './queue-name.js';
import { checkUrlPolicy } from './url-policy.js';
import { WorkerCounters } from './counters.js';
import type { FetchLimits } from './fetch-input.js';
import {
  GROUP_JOB,
  IMAGE_JOB,
  codeOfReason,
  failureReason,
  isPermanent,
  parseGroupJob,
  parseImageJob,
  type GroupImageResult,
  type GroupJobResult,
  type ImageJobResult,
  type JobOptions,
  type WorkerSnapshot,
} from './job.js';
import { runGroup } from './group-job.js';
import { openOutputDir, outputJob, type ManifestEntry } from '../bulk/index.js';

export interface FleetWorkerOptions {
  /** A redis:// URL (the worker owns its connections) or an ioredis client (the caller owns it). */
  redis: string | Redis;
  queue: string;
  /** A model path (opened here, once) or an open tower (the caller closes it). */
  model: string | VisionTower;
  open?: OpenOptions;
  outDir: string;
  /** Names this worker in job records, logs and queue-status; default host:pid. */
  name?: string;
  /** BullMQ's lock (default 30 s) and stalled-job check (default 30 s): how soon a dead worker's job is taken over. */
  lockDurationMs?: number;
  stalledIntervalMs?: number;
  /** How often a job may be taken back from a dead worker before it fails (default 1). */
  maxStalledCount?: number;
  /** Fetch limits and the URL policy (`allowPrivateUrls`: docs/fleet.md#urls). */
  fetch?: FetchLimits;
  /** Aborts a start that is still waiting for Redis (ERR_ABORTED; what was opened is closed). */
  signal?: AbortSignal;
  /** Called once per job outcome (the CLI's log line). */
  onEvent?: (event: FleetJobEvent) => void;
  /** What goes wrong without failing a job: Redis errors while the connection is down (BullMQ reconnects by itself), a manifest line that cannot be written. */
  onError?: (err: Error) => void;
}

export type FleetJobEvent =
  | { type: 'completed'; jobId: string; attempt: number; result: ImageJobResult | GroupJobResult }
  /** input: the image job's input, or a group's first input (inputs: every image of the group). */
  | { type: 'failed'; jobId: string; attempt: number; input: string; inputs?: string[]; code: ErrorCode; message: string; final: boolean; worker: WorkerSnapshot };

export interface FleetWorker {
  readonly name: string;
  readonly worker: Worker;
  readonly tower: VisionTower;
  readonly counters: WorkerCounters;
  /** Stops taking jobs, lets the current one finish, then closes the tower (if opened here) and the connection (if made here). */
  close(): Promise<void>;
}

export async function createWorker(opts: FleetWorkerOptions): Promise<FleetWorker> {
  checkQueueName(opts.queue, 'createWorker: queue');
  checkUrlPolicy({ allowPrivateUrls: opts.fetch?.allowPrivateUrls ?? false });
  if (!opts.outDir) throw new TesseraError('ERR_INVALID_ARGUMENT', 'createWorker: outDir must be given');
  const name = opts.name ?? `${hostname()}:${process.pid}`;
  const outDir = resolve(opts.outDir);
  const ownTower = typeof opts.model === 'string';
  const tower = typeof opts.model === 'string' ? await VisionTower.open(opts.model, opts.open ?? {}) : opts.model;
  const modelName = typeof opts.model === 'string' ? opts.model : tower.info.source;
  const counters = new WorkerCounters(name);

  // Temporary files are left alone: another worker, on another machine, may be writing them.
  const { manifest } = await openOutputDir(outDir, { removeStale: false }).catch(async (e: unknown) => {
    if (ownTower) await tower.close();
    throw e;
  });
  const ownConnection = typeof opts.redis === 'string';
  const connection = typeof opts.redis === 'string' ? connectRedis(opts.redis, `tessera-worker:${name}`) : opts.redis;
  // Manifest lines are appended in order, after Redis has recorded the outcome; close() waits for them.
  let manifestWrites: Promise<unknown> = Promise.resolve();
  const note = (entry: ManifestEntry) => {
    manifestWrites = manifestWrites.then(() => manifest.append(entry)).catch((e) => opts.onError?.(e as Error));
  };

  // The notes as `tessera encode --out-dir` gives them, so that the records (and so the files, and
  // the up-to-date check) are the same whichever of the two wrote them (outputJob records an
  // option given as its default as absent, so stages: false and no stages match too).
  const outputFor = (options: JobOptions) => {
    const { format = 'safetensors', outputDtype = 'f32', ...encodeOptions } = options;
    const out = outputJob(tower, { dir: outDir, format, outputDtype, model: modelName, options: encodeOptions, notes: { tessera_version: tesseraVersion(), demo_random_weights: 'false' } });
    return { out, encodeOptions };
  };

  const groupProcessor = async (job: Job, started: number): Promise<GroupJobResult> => {
    const data = parseGroupJob(job.data);
    job.updateProgress({ stage: 'encoding', images: data.inputs.length, worker: counters.snapshot() }).catch(() => undefined);
    const { out, encodeOptions } = outputFor(data.options);
    const g = await runGroup(tower, out, encodeOptions, data.inputs, opts.fetch);
    for (const r of g.images) if (r.error && isPermanent(r.error.code)) counters.imageFailed(r.error.code);
    // A transient error: the group is retried (its written images are skipped then).
    if (g.transient) throw g.transient;
    const done = performance.now();
    counters.jobDone(g.encoded, done - started);
    const count = (status: string) => g.images.filter((r) => r.status === status).length;
    return { group: true, images: g.images, encoded: g.encoded, skipped: count('skipped'), failed: count('failed'), timings: { ...g.timings, totalMs: done - started }, worker: counters.snapshot() };
  };

  // An image job: a group of one, whose failure (any, permanent or not) fails the job.
  const imageProcessor = async (job: Job, started: number): Promise<ImageJobResult> => {
    const data = parseImageJob(job.data);
    // Progress is a report, not part of the work: a lost connection must not fail the job.
    job.updateProgress({ stage: 'encoding', worker: counters.snapshot() }).catch(() => undefined);
    const { out, encodeOptions } = outputFor(data.options);
    const g = await runGroup(tower, out, encodeOptions, [data], opts.fetch);
    const image = g.images[0]!;
    if (image.error) throw new TesseraError(image.error.code, image.error.message);
    const done = performance.now();
    counters.jobDone(g.encoded, done - started);
    return { ...image, timings: { ...image.timings, totalMs: done - started }, worker: counters.snapshot() };
  };

  // Installed right after the Worker is made, before anything is awaited (so before any job is taken).
  let malformedJobs: MalformedJobs;
  const processor = async (job: Job): Promise<ImageJobResult | GroupJobResult> => {
    const started = performance.now();
    counters.jobStarted();
    try {
      // A record BullMQ could not decode (malformed-jobs.ts): failed once, readable afterwards.
      const malformed = malformedJobs.reason(job.id);
      if (malformed) {
        await malformedJobs.repair(job.id!);
        throw new TesseraError('ERR_INVALID_ARGUMENT', `job ${job.id}: ${malformed}`);
      }
      if (job.name === GROUP_JOB) return await groupProcessor(job, started);
      if (job.name === IMAGE_JOB) return await imageProcessor(job, started);
      throw new TesseraError('ERR_INVALID_ARGUMENT', `job ${job.id} is a '${job.name}' job; this worker runs '${IMAGE_JOB}' and '${GROUP_JOB}' jobs`);
    } catch (e) {
      const err = jobFailure(e);
      counters.jobFailed(err.code, performance.now() - started);
      if (isPermanent(err.code)) throw new UnrecoverableError(failureReason(err));
      throw new Error(failureReason(err));
    }
  };

  const worker = new Worker(opts.queue, processor, {
    connection,
    name,
    concurrency: 1,
    autorun: true,
    ...(opts.lockDurationMs ? { lockDuration: opts.lockDurationMs } : {}),
    ...(opts.stalledIntervalMs ? { stalledInterval: opts.stalledIntervalMs } : {}),
    ...(opts.maxStalledCount !== undefined ? { maxStalledCount: opts.maxStalledCount } : {}),
  });
  // One manifest line per image (a group's images each get theirs, as `encode --out-dir` writes them).
  const completed = (jobId: string, attempt: number, result: ImageJobResult | GroupJobResult) => {
    const images: GroupImageResult[] = 'group' in result ? result.images : [result];
    for (const r of images) {
      if (r.error) note({ input: r.input, output: null, status: 'failed', error: r.error });
      else note({ input: r.input, output: r.output, status: r.status, tokens: r.tokens, ms: { decode: r.timings.decodeMs, preprocess: r.timings.preprocessMs, encode: r.timings.encodeMs } });
    }
    opts.onEvent?.({ type: 'completed', jobId, attempt, result });
  };
  worker.on('completed', (job, result: ImageJobResult | GroupJobResult) => completed(String(job.id), job.attemptsMade, result));
  worker.on('failed', (job, err) => {
    if (!job) return;
    // The job's images as its data names them; data that does not parse is one entry, the job.
    const { input, inputs } = describeJobInputs(job.name, job.data, String(job.id));
    const code = codeOfReason(err.message);
    const message = err.message.replace(/^ERR_[A-Z_]+: /, '');
    const final = Boolean(job.finishedOn);
    if (final) for (const i of inputs ?? [input]) note({ input: i, output: null, status: 'failed', error: { code, message } });
    opts.onEvent?.({ type: 'failed', jobId: String(job.id), attempt: job.attemptsMade, input, ...(inputs ? { inputs } : {}), code, message, final, worker: counters.snapshot() });
  });
  // BullMQ reports connection trouble here while it reconnects; without a listener the
  // EventEmitter would throw.
  // When Redis goes away just as a job is being marked completed, the command may have been
  // carried out without its reply arriving; BullMQ retries it later and Redis answers "Missing
  // lock" (the job is no longer this worker's). Whether the first try did land is in the job's
  // record: completed with this worker's result means it did, and it is reported as completed
  // now; otherwise the job is another worker's (its lock ran out during the outage).
  const queue = new Queue(opts.queue, { connection });
  queue.on('error', () => undefined);
  const settled = new Set<string>();
  const checkLostAck = async (jobId: string) => {
    if (settled.has(jobId)) return;
    settled.add(jobId);
    const job = await queue.getJob(jobId);
    const result = job?.returnvalue as ImageJobResult | GroupJobResult | undefined;
    if (job && (await job.getState()) === 'completed' && result?.worker?.name === name && result.worker.pid === process.pid) {
      opts.onError?.(new Error(`job ${jobId}: Redis recorded its completion before the connection broke; reporting it now`));
      completed(jobId, job.attemptsMade, result);
    } else opts.onError?.(new Error(`job ${jobId}: lost its lock while Redis was away; BullMQ gives it to another worker`));
  };
  worker.on('error', (err) => {
    const lost = /^Missing lock for job (\S+)\. moveTo(Finished|Delayed|Failed)/.exec(err.message);
    if (lost) void checkLostAck(lost[1]!).catch((e) => opts.onError?.(e as Error));
    else opts.onError?.(err);
  });
  // A worker started before Redis waits for it (docs/fleet.md#failures), until `signal` says stop;
  // a reply that waiting will not cure (a wrong password) ends the start (ERR_IO).
  let onAbort = () => undefined as void;
  let onRedisError = (_e: unknown) => undefined as void;
  try {
    malformedJobs = guardJobDecoding(worker);
    await Promise.race([
      worker.waitUntilReady(),
      new Promise<never>((_, reject) => {
        onAbort = () => reject(new TesseraError('ERR_ABORTED', 'createWorker: stopped while waiting for Redis'));
        onRedisError = (e) => {
          if (isLastingReplyError(e)) reject(redisFailure(e, typeof opts.redis === 'string' ? opts.redis : undefined));
        };
        connection.on('error', onRedisError);
        if (opts.signal?.aborted) onAbort();
        else opts.signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } catch (e) {
    if (ownConnection) connection.disconnect();
    await worker.close(true).catch(() => undefined);
    await queue.close().catch(() => undefined);
    await manifest.close();
    if (ownTower) await tower.close();
    throw e;
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    connection.off('error', onRedisError);
  }

  let closing: Promise<void> | undefined;
  return {
    name,
    worker,
    tower,
    counters,
    close: () =>
      (closing ??= (async () => {
        await worker.close();
        await queue.close().catch(() => undefined);
        await manifestWrites;
        await manifest.close();
        if (ownTower) await tower.close();
        if (ownConnection) await connection.quit().catch(() => connection.disconnect());
      })()),
  };
}
