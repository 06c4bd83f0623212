// Adding image jobs: each under the id its content gives it (src/fleet/job.ts), so work already
// queued, running, done or failed is not added again; the answer says which ids were new and in
// what state the others are.
import type { Queue } from 'bullmq';
import { IMAGE_JOB, jobAddOptions, jobIdOf, parseImageJob, type ImageJob } from './job.js';

export interface EnqueuedJob {
  id: string;
  input: string;
  /** 'added', or the state the job already had (completed, failed, waiting, active, delayed, ...). */
  state: string;
}

export interface EnqueueOptions {
  attempts?: number;
  backoffMs?: number;
}

const CHUNK = 500;

export async function enqueueImages(queue: Queue, jobs: readonly ImageJob[], opts: EnqueueOptions = {}): Promise<EnqueuedJob[]> {
  const out: EnqueuedJob[] = [];
  const seen = new Set<string>();
  for (let start = 0; start < jobs.length; start += CHUNK) {
    const chunk = jobs.slice(start, start + CHUNK).map((j) => ({ data: parseImageJob(j), id: jobIdOf(j) }));
    const states = await Promise.all(chunk.map((j) => queue.getJobState(j.id)));
    const fresh = chunk.filter((j, k) => states[k] === 'unknown' && !seen.has(j.id));
    for (const j of chunk) seen.add(j.id);
    if (fresh.length) {
      await queue.addBulk(fresh.map((j) => ({ name: IMAGE_JOB, data: j.data, opts: jobAddOptions(j.id, opts.attempts, opts.backoffMs) })));
    }
    const freshIds = new Set(fresh.map((j) => j.id));
    chunk.forEach((j, k) => out.push({ id: j.id, input: j.data.input, state: freshIds.has(j.id) ? 'added' : states[k] === 'unknown' ? 'duplicate' : String(states[k]) }));
  }
  return out;
}
