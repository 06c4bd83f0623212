// Following a set of jobs to the end (`tessera enqueue --wait`): BullMQ's event stream says when
// each completes or finally fails, and every few seconds the states of the jobs still pending are
// read back, so an event missed while the connection was down (or trimmed from the stream) delays
// the answer by one period at most instead of losing it.
import { QueueEvents, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ErrorCode } from '../errors.js';
import { codeOfReason } from './job.js';

export interface JobFailure {
  id: string;
  code: ErrorCode;
  message: string;
}

export interface WaitProgress {
  total: number;
  completed: number;
  failed: number;
  /** Completions per second over the last RATE_WINDOW_MS. */
  rate: number;
  /** Seconds until the rest is done at that rate (undefined while there is no rate yet). */
  etaSeconds: number | undefined;
  queue: { waiting: number; active: number; delayed: number };
}

export interface WaitOutcome {
  completed: string[];
  failed: JobFailure[];
}

const RATE_WINDOW_MS = 30_000;

export async function waitForJobs(
  queue: Queue,
  connection: Redis,
  ids: readonly string[],
  opts: { onProgress?: (p: WaitProgress) => void; progressMs?: number; signal?: AbortSignal } = {},
): Promise<WaitOutcome> {
  const pending = new Set(ids);
  const completed: string[] = [];
  const failed = new Map<string, JobFailure>();
  const doneTimes: number[] = [];
  // Jobs found finished before we began waiting do not count towards the rate.
  let timing = false;
  const finish = (id: string, failure?: JobFailure) => {
    if (!pending.delete(id)) return;
    if (failure) failed.set(id, failure);
    else completed.push(id);
    if (timing) doneTimes.push(Date.now());
  };

  // QueueEvents blocks on its connection (XREAD): it gets one of its own.
  const eventsConnection = connection.duplicate();
  eventsConnection.on('error', () => undefined); // reconnects by itself
  const events = new QueueEvents(queue.name, { connection: eventsConnection });
  events.on('completed', ({ jobId }) => finish(jobId));
  events.on('failed', ({ jobId, failedReason }) => finish(jobId, { id: jobId, code: codeOfReason(failedReason), message: failedReason.replace(/^ERR_[A-Z_]+: /, '') }));
  events.on('error', () => undefined); // reconnects by itself; the reconciliation covers the gap
  await events.waitUntilReady();

  const reconcile = async () => {
    const list = [...pending];
    for (let i = 0; i < list.length; i += 500) {
      const chunk = list.slice(i, i + 500);
      const states = await Promise.all(chunk.map((id) => queue.getJobState(id)));
      await Promise.all(
        chunk.map(async (id, k) => {
          if (states[k] === 'completed') finish(id);
          else if (states[k] === 'failed') {
            const job = await queue.getJob(id);
            const reason = job?.failedReason ?? '';
            finish(id, { id, code: codeOfReason(reason), message: reason.replace(/^ERR_[A-Z_]+: /, '') });
          }
        }),
      );
    }
  };

  const report = async () => {
    if (!opts.onProgress) return;
    const now = Date.now();
    while (doneTimes.length && doneTimes[0]! < now - RATE_WINDOW_MS) doneTimes.shift();
    const windowMs = Math.min(RATE_WINDOW_MS, now - started);
    const rate = windowMs > 0 ? doneTimes.length / (windowMs / 1000) : 0;
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    opts.onProgress({
      total: ids.length,
      completed: completed.length,
      failed: failed.size,
      rate,
      etaSeconds: rate > 0 ? pending.size / rate : undefined,
      queue: { waiting: (counts['waiting'] ?? 0) + (counts['prioritized'] ?? 0), active: counts['active'] ?? 0, delayed: counts['delayed'] ?? 0 },
    });
  };

  const started = Date.now();
  const progressMs = opts.progressMs ?? 1000;
  let lastReconcile = 0;
  try {
    await reconcile(); // jobs that were done before we listened
    timing = true;
    while (pending.size > 0 && !opts.signal?.aborted) {
      await new Promise((r) => setTimeout(r, progressMs));
      // Read states back every few seconds: often when few are left, rarely for huge runs.
      const every = pending.size < 2000 ? 2000 : 15_000;
      if (Date.now() - lastReconcile >= every) {
        lastReconcile = Date.now();
        await reconcile();
      }
      await report();
    }
    await report();
  } finally {
    await events.close().catch(() => undefined);
    eventsConnection.disconnect();
  }
  return { completed, failed: [...failed.values()] };
}
