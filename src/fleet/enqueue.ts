// Adding image and group jobs: each under the id its content gives it (src/fleet/job.ts), so work
// already queued, running, done or failed is not added again; the answer says which ids were new
// and in what state the others are.
import type { Queue } from 'bullmq';
import { GROUP_JOB, IMAGE_JOB, groupJobIdOf, jobAddOptions, jobIdOf, parseGroupJob, parseImageJob, type GroupJob, type ImageJob } from './job.js';

export interface EnqueuedJob {
  id: string;
  /** The image job's input, or a group's first input. */
  input: string;
  /** A group's images, in its order (absent for an image job). */
  inputs?: string[];
  /** 'added', or the state the job already had (completed, failed, waiting, active, delayed, ...). */
  state: string;
}

export interface EnqueueOptions {
  attempts?: number;
  backoffMs?: number;
}

const CHUNK = 500;

interface Prepared {
  name: string;
  data: unknown;
  id: string;
  inputs: string[];
}

async function addJobs(queue: Queue, jobs: readonly Prepared[], opts: EnqueueOptions, group: boolean): Promise<EnqueuedJob[]> {
  const out: EnqueuedJob[] = [];
  const seen = new Set<string>();
  for (let start = 0; start < jobs.length; start += CHUNK) {
    const chunk = jobs.slice(start, start + CHUNK);
    const states = await Promise.all(chunk.map((j) => queue.getJobState(j.id)));
    const fresh = chunk.filter((j, k) => states[k] === 'unknown' && !seen.has(j.id));
    for (const j of chunk) seen.add(j.id);
    if (fresh.length) {
      await queue.addBulk(fresh.map((j) => ({ name: j.name, data: j.data, opts: jobAddOptions(j.id, opts.attempts, opts.backoffMs) })));
    }
    const freshIds = new Set(fresh.map((j) => j.id));
    chunk.forEach((j, k) =>
      out.push({
        id: j.id,
        input: j.inputs[0]!,
        ...(group ? { inputs: j.inputs } : {}),
        state: freshIds.has(j.id) ? 'added' : states[k] === 'unknown' ? 'duplicate' : String(states[k]),
      }),
    );
  }
  return out;
}

export async function enqueueImages(queue: Queue, jobs: readonly ImageJob[], opts: EnqueueOptions = {}): Promise<EnqueuedJob[]> {
  const prepared = jobs.map((j) => {
    const data = parseImageJob(j);
    return { name: IMAGE_JOB, data, id: jobIdOf(j), inputs: [data.input] };
  });
  return addJobs(queue, prepared, opts, false);
}

/** Group jobs (each at most MAX_GROUP_IMAGES images, encoded together by one worker). */
export async function enqueueGroups(queue: Queue, jobs: readonly GroupJob[], opts: EnqueueOptions = {}): Promise<EnqueuedJob[]> {
  const prepared = jobs.map((j) => {
    const data = parseGroupJob(j);
    return { name: GROUP_JOB, data, id: groupJobIdOf(j), inputs: data.inputs.map((i) => i.input) };
  });
  return addJobs(queue, prepared, opts, true);
}
