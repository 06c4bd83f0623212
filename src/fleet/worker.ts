// createWorker: a BullMQ Worker that encodes image jobs with one tower (docs/fleet.md). One job at a
// time (concurrency 1): the native code already spreads one encode over every core, so a second
// job in the same process would only compete with the first. The tower is opened once, when the
// worker is created, and closed with it.
//
// Failures (src/fleet/job.ts): errors about the input fail the job at once (UnrecoverableError);
// the rest are thrown as plain errors, which BullMQ retries with the job's backoff. A worker that
// dies mid-job holds a lock that stops being renewed; BullMQ's stalled-job check of any other
// worker puts the job back in the queue. close() lets the job in hand finish first.
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { TesseraError, toTesseraError, type ErrorCode } from '../errors.js';
import { VisionTower, type OpenOptions } from '../tower.js';
import { tesseraVersion } from '../cli/demo.js';
import { connectRedis } from './connection.js';
import { WorkerCounters } from './counters.js';
import { fetchInput, type FetchLimits } from './fetch-input.js';
import { IMAGE_JOB, codeOfReason, failureReason, isPermanent, parseImageJob, type ImageJobResult, type WorkerSnapshot } from './job.js';
import { writeImageOutput } from './output.js';

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
  fetch?: FetchLimits;
  /** Called once per job outcome (the CLI's log line). */
  onEvent?: (event: FleetJobEvent) => void;
  /** Redis errors while the connection is down (BullMQ reconnects by itself). */
  onConnectionError?: (err: Error) => void;
}

export type FleetJobEvent =
  | { type: 'completed'; jobId: string; attempt: number; result: ImageJobResult }
  | { type: 'failed'; jobId: string; attempt: number; input: string; code: ErrorCode; message: string; final: boolean; worker: WorkerSnapshot };

export interface FleetWorker {
  readonly name: string;
  readonly worker: Worker;
  readonly tower: VisionTower;
  readonly counters: WorkerCounters;
  /** Stops taking jobs, lets the current one finish, then closes the tower (if opened here) and the connection (if made here). */
  close(): Promise<void>;
}

export async function createWorker(opts: FleetWorkerOptions): Promise<FleetWorker> {
  if (!opts.queue) throw new TesseraError('ERR_INVALID_ARGUMENT', 'createWorker: queue must be a non-empty name');
  if (!opts.outDir) throw new TesseraError('ERR_INVALID_ARGUMENT', 'createWorker: outDir must be given');
  const name = opts.name ?? `${hostname()}:${process.pid}`;
  const outDir = resolve(opts.outDir);
  const ownTower = typeof opts.model === 'string';
  const tower = typeof opts.model === 'string' ? await VisionTower.open(opts.model, opts.open ?? {}) : opts.model;
  const modelName = typeof opts.model === 'string' ? opts.model : tower.info.source;
  const ownConnection = typeof opts.redis === 'string';
  const connection = typeof opts.redis === 'string' ? connectRedis(opts.redis, `tessera-worker:${name}`) : opts.redis;
  const counters = new WorkerCounters(name);

  const processor = async (job: Job): Promise<ImageJobResult> => {
    const started = performance.now();
    counters.jobStarted();
    try {
      if (job.name !== IMAGE_JOB) throw new TesseraError('ERR_INVALID_ARGUMENT', `job ${job.id} is a '${job.name}' job; this worker runs '${IMAGE_JOB}' jobs`);
      const data = parseImageJob(job.data);
      // Progress is a report, not part of the work: a lost connection must not fail the job.
      job.updateProgress({ stage: 'encoding', worker: counters.snapshot() }).catch(() => undefined);
      const isUrl = /^https?:\/\//i.test(data.input);
      const image = isUrl ? await fetchInput(data.input, opts.fetch) : data.input;
      const fetched = performance.now();
      const r = await tower.encode(image, data.options);
      const encoded = performance.now();
      const output = data.output ?? defaultOutputName(data.input);
      const written = await writeImageOutput(outDir, output, r, {
        input: data.input,
        options: JSON.stringify(data.options),
        model: modelName,
        family: tower.info.family,
        tessera_version: tesseraVersion(),
      });
      const done = performance.now();
      counters.jobDone(1, done - started);
      return {
        input: data.input,
        output: written.path,
        outputRelative: written.relative,
        sha256: written.sha256,
        bytes: written.bytes,
        tokens: r.tokens,
        width: r.width,
        timings: {
          fetchMs: isUrl ? fetched - started : 0,
          decodeMs: r.timings.decodeMs,
          preprocessMs: r.timings.preprocessMs,
          encodeMs: r.timings.encodeMs,
          writeMs: done - encoded,
          totalMs: done - started,
        },
        worker: counters.snapshot(),
      };
    } catch (e) {
      const err = toTesseraError(e);
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
  worker.on('completed', (job, result: ImageJobResult) => {
    opts.onEvent?.({ type: 'completed', jobId: String(job.id), attempt: job.attemptsMade, result });
  });
  worker.on('failed', (job, err) => {
    if (!job) return;
    const input = typeof (job.data as { input?: unknown })?.input === 'string' ? (job.data as { input: string }).input : '?';
    const code = codeOfReason(err.message);
    const message = err.message.replace(/^ERR_[A-Z_]+: /, '');
    opts.onEvent?.({ type: 'failed', jobId: String(job.id), attempt: job.attemptsMade, input, code, message, final: Boolean(job.finishedOn), worker: counters.snapshot() });
  });
  // BullMQ reports connection trouble here while it reconnects; without a listener the
  // EventEmitter would throw.
  worker.on('error', (err) => opts.onConnectionError?.(err));
  await worker.waitUntilReady();

  let closing: Promise<void> | undefined;
  return {
    name,
    worker,
    tower,
    counters,
    close: () =>
      (closing ??= (async () => {
        await worker.close();
        if (ownTower) await tower.close();
        if (ownConnection) await connection.quit().catch(() => connection.disconnect());
      })()),
  };
}

/** An input's output name when the job gives none: its base name without extension. */
export function defaultOutputName(input: string): string {
  const path = /^https?:\/\//i.test(input) ? new URL(input).pathname : input;
  const base = path.split(/[\\/]/).filter(Boolean).pop() ?? 'image';
  return base.replace(/\.[^.]*$/, '') || 'image';
}
