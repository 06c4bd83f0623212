// `tessera queue-status`: the queue's job counts, its failures by code, the rate of the last
// minute, and each worker's counters as its latest finished job reported them. Read from the
// job records BullMQ keeps (bounded to the most recent `recent` finished jobs), nothing else.
import type { Queue } from 'bullmq';
import type { ErrorCode } from '../errors.js';
import { codeOfReason, type ImageJobResult, type WorkerSnapshot } from './job.js';

export interface QueueStatus {
  queue: string;
  counts: { waiting: number; active: number; delayed: number; completed: number; failed: number };
  /** Final failures by code among the most recent failed jobs. */
  failures: Partial<Record<ErrorCode, number>>;
  /** Jobs completed in the last minute, per second. */
  ratePerSecond: number;
  /** Connections BullMQ workers hold on this queue now. */
  connectedWorkers: number;
  /** Each worker's counters from its most recent completed job (the newest first). */
  workers: (WorkerSnapshot & { lastJobAt: number })[];
  /** How many finished jobs were read for failures, rate and workers. */
  sampled: number;
}

export async function queueStatus(queue: Queue, recent = 2000): Promise<QueueStatus> {
  const c = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'completed', 'failed');
  const [done, failed, workers] = await Promise.all([queue.getCompleted(0, recent - 1), queue.getFailed(0, recent - 1), queue.getWorkers()]);
  const failures: Partial<Record<ErrorCode, number>> = {};
  for (const j of failed) {
    if (!j) continue;
    const code = codeOfReason(j.failedReason);
    failures[code] = (failures[code] ?? 0) + 1;
  }
  const now = Date.now();
  let lastMinute = 0;
  const latest = new Map<string, WorkerSnapshot & { lastJobAt: number }>();
  for (const j of done) {
    if (!j) continue;
    const at = j.finishedOn ?? 0;
    if (at >= now - 60_000) lastMinute++;
    const w = (j.returnvalue as ImageJobResult | undefined)?.worker;
    if (w && (latest.get(w.name)?.lastJobAt ?? -1) < at) latest.set(w.name, { ...w, lastJobAt: at });
  }
  return {
    queue: queue.name,
    counts: {
      waiting: (c['waiting'] ?? 0) + (c['prioritized'] ?? 0),
      active: c['active'] ?? 0,
      delayed: c['delayed'] ?? 0,
      completed: c['completed'] ?? 0,
      failed: c['failed'] ?? 0,
    },
    failures,
    ratePerSecond: lastMinute / 60,
    connectedWorkers: workers.length,
    workers: [...latest.values()].sort((a, b) => b.lastJobAt - a.lastJobAt),
    sampled: done.length + failed.length,
  };
}
