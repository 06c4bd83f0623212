// Jobs whose stored record cannot be decoded. BullMQ stores a job's data and options as JSON strings
// and parses them when a worker takes the job; a record someone wrote by hand (or a broken writer)
// that is not JSON made that parse throw inside BullMQ after the job had been moved to active, so
// the job was never handed to the processor: it stayed active, the stalled-job check put it back,
// the worker took it again, and the worker logged the parse error every second, forever.
//
// guardJobDecoding checks those fields in the raw replies of the commands that hand a job to the
// worker, before BullMQ parses them: an unparsable field is replaced (so that BullMQ builds the job)
// and the job is remembered as malformed. The processor then fails it once, as ERR_INVALID_ARGUMENT
// (no retry: the record will not change), after storing the fields as valid JSON so that every
// later reader (queue-status, `enqueue --wait`, a dashboard) can read the failed job.
//
// This reaches into BullMQ's Redis backend (its execCommand, public in its types): there is no
// hook for it; test/fleet-hostile-jobs.test.ts fails if a BullMQ update moves it.
import type { Worker } from 'bullmq';
import { TesseraError } from '../errors.js';

/** The fields BullMQ JSON.parses when it builds a job it hands to a worker, and what replaces a broken one. */
const DECODED_FIELDS: Record<string, string> = { data: '{}', opts: '{}', progress: '0' };

/** The commands whose reply carries the next job (BullMQ's raw2NextJobData). */
const NEXT_JOB_COMMANDS = new Set(['moveToActive', 'moveToFinished', 'moveToDelayed']);

export interface MalformedJobs {
  /** Why the job's record could not be decoded, if it could not. */
  reason(jobId: string | undefined): string | undefined;
  /** Stores the job's undecodable fields as JSON (the original text kept, cut to 1 KiB) and forgets it. */
  repair(jobId: string): Promise<void>;
}

function parses(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

export function guardJobDecoding(worker: Worker): MalformedJobs {
  const found = new Map<string, { why: string; fields: Record<string, string> }>();
  const backend = worker.backend as unknown as { execCommand?: (client: unknown, command: string, args: unknown[]) => Promise<unknown> };
  if (typeof backend.execCommand !== 'function') throw new TesseraError('ERR_INTERNAL', 'this BullMQ version has no backend.execCommand: the malformed-job guard cannot be installed');
  const exec = backend.execCommand.bind(backend);
  backend.execCommand = async (client, command, args) => {
    const reply = await exec(client, command, args);
    if (!NEXT_JOB_COMMANDS.has(command.replace(/:.*$/, '')) || !Array.isArray(reply) || !Array.isArray(reply[0])) return reply;
    const hash = reply[0] as unknown[];
    const jobId = String(reply[1]);
    const broken: Record<string, string> = {};
    for (let k = 0; k + 1 < hash.length; k += 2) {
      const field = String(hash[k]);
      const value = hash[k + 1];
      if (field in DECODED_FIELDS && typeof value === 'string' && !parses(value)) {
        broken[field] = value;
        hash[k + 1] = DECODED_FIELDS[field];
      }
    }
    const names = Object.keys(broken);
    if (names.length) found.set(jobId, { why: `its stored ${names.join(' and ')} ${names.length > 1 ? 'are' : 'is'} not valid JSON`, fields: broken });
    return reply;
  };
  return {
    reason: (jobId) => (jobId === undefined ? undefined : found.get(jobId)?.why),
    repair: async (jobId) => {
      const entry = found.get(jobId);
      if (!entry) return;
      found.delete(jobId);
      const client = (await worker.backend.client) as unknown as { hset(key: string, values: Record<string, string>): Promise<unknown> };
      const values: Record<string, string> = {};
      for (const [field, text] of Object.entries(entry.fields))
        values[field] = field === 'data' ? JSON.stringify({ unparsable: text.slice(0, 1024) }) : DECODED_FIELDS[field]!;
      await client.hset(worker.toKey(jobId), values);
    },
  };
}
