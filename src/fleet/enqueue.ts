// Adding image and group jobs: each under the id its content gives it (src/fleet/job.ts), so work
// already queued, running, done or failed is not added again; the answer says which ids were new
// and in what state the others are.
//
// Before anything is added, every job's data is checked (job-data.ts) and the jobs' outputs are
// checked to be distinct, with the check `encode --out-dir` applies (a.png and a.jpg, or the same
// name under two roots, would overwrite each other's output, and re-enqueueing could not bring the
// lost one back). A connection lost while adding ends the call with ERR_IO saying how many jobs
// are in the queue at least, and how many more may be: adding the same jobs again adds exactly the
// rest (ids).
import type { Queue } from 'bullmq';
import { TesseraError } from '../errors.js';
import { checkDistinctOutputs, type BulkInput } from '../bulk/index.js';
import { GROUP_JOB, IMAGE_JOB, groupJobIdOf, jobAddOptions, jobIdOf, parseGroupJob, parseImageJob, type GroupJob, type ImageJob } from './job.js';
import { defaultRel } from './job-output.js';
import { redisFailure } from './redis-errors.js';

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
  /** Each image's input and output path (rel). */
  images: { input: string; rel?: string | undefined }[];
}

/** Refuses jobs whose images would be written to the same output files (a job given twice is one job). */
function checkDistinctJobOutputs(jobs: readonly Prepared[]): void {
  const ids = new Set<string>();
  const images: BulkInput[] = [];
  for (const j of jobs) {
    if (ids.has(j.id)) continue;
    ids.add(j.id);
    for (const i of j.images) images.push({ path: i.input, root: '', rel: i.rel ?? defaultRel(i.input) });
  }
  checkDistinctOutputs({ dir: '' }, images);
}

async function addJobs(queue: Queue, jobs: readonly Prepared[], opts: EnqueueOptions, group: boolean): Promise<EnqueuedJob[]> {
  checkDistinctJobOutputs(jobs);
  const out: EnqueuedJob[] = [];
  const inFlight = { jobs: 0 };
  try {
    await addChunks(queue, jobs, opts, group, out, inFlight);
  } catch (e) {
    const err = redisFailure(e);
    const added = out.filter((j) => j.state === 'added').length;
    // addBulk sends a batch as one pipeline, not a transaction: when the connection breaks during it,
    // Redis may have taken any part of it, and nobody can ask it which. So the count is a lower bound,
    // and the batch in flight bounds it from above.
    const maybe = inFlight.jobs ? `; up to ${inFlight.jobs} more, of the batch being added when it broke off, may have landed too` : '';
    throw new TesseraError(
      'ERR_IO',
      `${err.message}: at least ${out.length} of ${jobs.length} jobs are in the queue (${added} added now, ${out.length - added} there before)${maybe}. ` +
        `The jobs in the queue stay there; enqueueing the same inputs again adds exactly the rest`,
      { cause: e },
    );
  }
  return out;
}

async function addChunks(queue: Queue, jobs: readonly Prepared[], opts: EnqueueOptions, group: boolean, out: EnqueuedJob[], inFlight: { jobs: number }): Promise<void> {
  const seen = new Set<string>();
  for (let start = 0; start < jobs.length; start += CHUNK) {
    const chunk = jobs.slice(start, start + CHUNK);
    const states = await Promise.all(chunk.map((j) => queue.getJobState(j.id)));
    const fresh = chunk.filter((j, k) => states[k] === 'unknown' && !seen.has(j.id));
    for (const j of chunk) seen.add(j.id);
    if (fresh.length) {
      inFlight.jobs = fresh.length;
      await queue.addBulk(fresh.map((j) => ({ name: j.name, data: j.data, opts: jobAddOptions(j.id, opts.attempts, opts.backoffMs) })));
      inFlight.jobs = 0;
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
}

export async function enqueueImages(queue: Queue, jobs: readonly ImageJob[], opts: EnqueueOptions = {}): Promise<EnqueuedJob[]> {
  const prepared = jobs.map((j) => {
    const data = parseImageJob(j);
    return { name: IMAGE_JOB, data, id: jobIdOf(j), inputs: [data.input], images: [data] };
  });
  return addJobs(queue, prepared, opts, false);
}

/** Group jobs (each at most MAX_GROUP_IMAGES images, encoded together by one worker). */
export async function enqueueGroups(queue: Queue, jobs: readonly GroupJob[], opts: EnqueueOptions = {}): Promise<EnqueuedJob[]> {
  const prepared = jobs.map((j) => {
    const data = parseGroupJob(j);
    return { name: GROUP_JOB, data, id: groupJobIdOf(j), inputs: data.inputs.map((i) => i.input), images: data.inputs };
  });
  return addJobs(queue, prepared, opts, true);
}
