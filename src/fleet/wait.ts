// Following a set of jobs to the end (`tessera enqueue --wait`): BullMQ's event stream says when
// each completes or finally fails, and every few seconds the states of the jobs still pending are
// read back, so an event missed while the connection was down (or trimmed from the stream) delays
// the answer by one period at most instead of losing it. Progress counts images: a group job
// (`enqueue --group N`) counts as its images, and its images that failed with an input error (in
// its result) count as failed though the job completed.
import { QueueEvents, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ErrorCode } from '../errors.js';
import { codeOfReason } from './job.js';

export interface JobFailure {
  id: string;
  /** The image (a group job's failures name each of its images). */
  input?: string;
  code: ErrorCode;
  message: string;
}

export interface WaitProgress {
  /** Images: of all the jobs, finished without error, failed. */
  total: number;
  completed: number;
  failed: number;
  /** Images finished per second over the last RATE_WINDOW_MS. */
  rate: number;
  /** Seconds until the rest is done at that rate (undefined while there is no rate yet). */
  etaSeconds: number | undefined;
  queue: { waiting: number; active: number; delayed: number };
}

export interface WaitOutcome {
  /** Ids of the jobs that completed (a group among them may list failed images in `failed`). */
  completed: string[];
  /** One per failed image: an image job's failure, a failed group's images, a completed group's failed images. */
  failed: JobFailure[];
  images: { total: number; completed: number; failed: number };
}

const RATE_WINDOW_MS = 30_000;

export async function waitForJobs(
  queue: Queue,
  connection: Redis,
  ids: readonly string[],
  opts: { onProgress?: (p: WaitProgress) => void; progressMs?: number; signal?: AbortSignal; groups?: ReadonlyMap<string, readonly string[]> } = {},
): Promise<WaitOutcome> {
  const pending = new Set(ids);
  const completed: string[] = [];
  const failed: JobFailure[] = [];
  const imagesOf = (id: string) => opts.groups?.get(id)?.length ?? 1;
  const totalImages = ids.reduce((n, id) => n + imagesOf(id), 0);
  let completedImages = 0;
  const doneTimes: number[] = [];
  // Jobs found finished before we began waiting do not count towards the rate.
  let timing = false;
  const finish = (id: string, failure?: JobFailure, result?: unknown) => {
    if (!pending.delete(id)) return;
    const group = opts.groups?.get(id);
    if (failure) {
      if (group) for (const input of group) failed.push({ ...failure, input });
      else failed.push(failure);
    } else {
      completed.push(id);
      const images = group ? (result as { images?: { input: string; error?: { code: ErrorCode; message: string } }[] } | undefined)?.images : undefined;
      const bad = images?.filter((i) => i.error) ?? [];
      for (const i of bad) failed.push({ id, input: i.input, code: i.error!.code, message: i.error!.message });
      completedImages += imagesOf(id) - bad.length;
    }
    if (timing) for (let k = imagesOf(id); k > 0; k--) doneTimes.push(Date.now());
  };

  // QueueEvents blocks on its connection (XREAD): it gets one of its own.
  const eventsConnection = connection.duplicate();
  eventsConnection.on('error', () => undefined); // reconnects by itself
  const events = new QueueEvents(queue.name, { connection: eventsConnection });
  events.on('completed', ({ jobId, returnvalue }) => {
    // A group's result says which of its images failed; read it back if the event lacks it.
    if (!opts.groups?.has(jobId) || (returnvalue && typeof returnvalue === 'object')) finish(jobId, undefined, returnvalue);
    else void queue.getJob(jobId).then((j) => finish(jobId, undefined, j?.returnvalue), () => undefined);
  });
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
          if (states[k] === 'completed') finish(id, undefined, opts.groups?.has(id) ? (await queue.getJob(id))?.returnvalue : undefined);
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
      total: totalImages,
      completed: completedImages,
      failed: failed.length,
      rate,
      etaSeconds: rate > 0 ? (totalImages - completedImages - failed.length) / rate : undefined,
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
  return { completed, failed, images: { total: totalImages, completed: completedImages, failed: failed.length } };
}
