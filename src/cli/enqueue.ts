// `tessera enqueue <inputs...> --redis URL --queue NAME [--wait]` (docs/fleet.md): one job per image
// (files, folders, `-` for a list on stdin, http(s) URLs), or with --group N one job per N images
// (in the order they are listed), each under an id derived from its inputs, options and output
// names, so enqueuing the same work twice adds nothing. --wait follows the jobs
// to the end with a progress line (done, failed, rate, ETA) and exits 0 when all completed, 1 when
// some failed (each listed with its code).
import { parseArgs } from 'node:util';
import { toTesseraError } from '../errors.js';
import { MAX_GROUP_IMAGES, type JobOptions } from '../fleet/job.js';
import { EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, type CliIo } from './io.js';
import { listJobInputs } from '../fleet/inputs.js';
import { OUTPUT_FORMATS } from '../bulk/index.js';

export const ENQUEUE_USAGE = `usage: tessera enqueue <image|folder|url|-...> --redis URL --queue NAME [--wait] [--json]
                       [--format safetensors|npy|vllm|vllm-torch|vllm-encoder-cache|sglang] [--exclude GLOB] [--min-pixels N] [--max-pixels N]
                       [--max-soft-tokens N] [--stages] [--group N]
                       [--attempts N] [--backoff-ms MS] [--progress-interval S]
'-' reads a newline-separated list of inputs from stdin. --group N: N images per job (1 to ${MAX_GROUP_IMAGES}; default 1),
encoded together by one worker. Exit codes with --wait: 0 all images completed, 1 some failed.`;

class UsageError extends Error {}

const FIRST_CONNECT_MS = 15_000;

function positiveInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n <= 0) throw new UsageError(`--${name} must be a positive integer (got '${v}')`);
  return n;
}

function clock(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

export async function enqueueCommand(args: readonly string[], io: CliIo, stdin: () => Promise<string>): Promise<number> {
  let values, positionals: string[];
  const options: JobOptions = {};
  let attempts: number | undefined, backoffMs: number | undefined, progressS: number, group: number;
  try {
    ({ values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      strict: true,
      options: {
        redis: { type: 'string' },
        queue: { type: 'string' },
        wait: { type: 'boolean' },
        json: { type: 'boolean' },
        'min-pixels': { type: 'string' },
        'max-pixels': { type: 'string' },
        'max-soft-tokens': { type: 'string' },
        stages: { type: 'boolean' },
        format: { type: 'string' },
        exclude: { type: 'string', multiple: true },
        attempts: { type: 'string' },
        'backoff-ms': { type: 'string' },
        'progress-interval': { type: 'string' },
        group: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
    if (values.help) {
      io.out(ENQUEUE_USAGE);
      return EXIT_OK;
    }
    if (!values.redis) throw new UsageError('--redis is required');
    if (!values.queue) throw new UsageError('--queue is required');
    if (positionals.length === 0) throw new UsageError('no inputs given');
    const minPixels = positiveInt('min-pixels', values['min-pixels']);
    const maxPixels = positiveInt('max-pixels', values['max-pixels']);
    const maxSoftTokens = positiveInt('max-soft-tokens', values['max-soft-tokens']);
    if (minPixels !== undefined) options.minPixels = minPixels;
    if (maxPixels !== undefined) options.maxPixels = maxPixels;
    if (maxSoftTokens !== undefined) options.maxSoftTokens = maxSoftTokens;
    if (values.stages) options.stages = true;
    if (values.format !== undefined) {
      if (!(OUTPUT_FORMATS as readonly string[]).includes(values.format))
        throw new UsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')} (got '${values.format}')`);
      options.format = values.format as (typeof OUTPUT_FORMATS)[number];
    }
    attempts = positiveInt('attempts', values.attempts);
    backoffMs = positiveInt('backoff-ms', values['backoff-ms']);
    progressS = positiveInt('progress-interval', values['progress-interval']) ?? 5;
    group = positiveInt('group', values.group) ?? 1;
    if (group > MAX_GROUP_IMAGES) throw new UsageError(`--group must be at most ${MAX_GROUP_IMAGES} (got ${group})`);
  } catch (e) {
    io.err(`tessera enqueue: ${(e as Error).message}\n${ENQUEUE_USAGE}`);
    return EXIT_USAGE;
  }
  const json = values.json ?? false;

  let inputs;
  try {
    inputs = await listJobInputs(positionals, stdin, values.exclude ?? []);
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera enqueue: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  if (inputs.length === 0) {
    io.err('tessera enqueue: the inputs hold no images');
    return EXIT_USAGE;
  }

  const { Queue } = await import('bullmq');
  const { connectRedis } = await import('../fleet/connection.js');
  const { enqueueImages, enqueueGroups } = await import('../fleet/enqueue.js');
  const { waitForJobs } = await import('../fleet/wait.js');
  let connection;
  try {
    connection = connectRedis(values.redis, 'tessera-enqueue');
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera enqueue: ${err.message}`);
    return EXIT_USAGE;
  }
  connection.on('error', () => undefined); // reconnects by itself
  // Once connected, a lost Redis is waited out; a Redis never reached (a wrong URL) is an error.
  const reached = await Promise.race([
    connection.ping().then(() => true, () => false),
    new Promise<boolean>((r) => setTimeout(() => r(false), FIRST_CONNECT_MS).unref()),
  ]);
  if (!reached) {
    io.err(`tessera enqueue: cannot reach Redis at ${values.redis} (no answer within ${FIRST_CONNECT_MS / 1000} s)`);
    connection.disconnect();
    return EXIT_USAGE;
  }
  const queue = new Queue(values.queue, { connection });
  queue.on('error', () => undefined);
  try {
    const retry = { ...(attempts ? { attempts } : {}), ...(backoffMs ? { backoffMs } : {}) };
    const groups: { input: string; rel: string }[][] = [];
    for (let i = 0; i < inputs.length; i += group) groups.push(inputs.slice(i, i + group).map((x) => ({ input: x.input, rel: x.rel })));
    const jobs =
      group === 1
        ? await enqueueImages(queue, inputs.map((i) => ({ input: i.input, rel: i.rel, options })), retry)
        : await enqueueGroups(queue, groups.map((g) => ({ inputs: g, options })), retry);
    const byState = new Map<string, number>();
    for (const j of jobs) byState.set(j.state, (byState.get(j.state) ?? 0) + 1);
    const added = byState.get('added') ?? 0;
    const others = [...byState].filter(([s]) => s !== 'added');
    if (json) {
      for (const j of jobs) io.out(JSON.stringify({ type: 'job', ...j }));
      io.out(JSON.stringify({ type: 'enqueued', queue: values.queue, jobs: jobs.length, added, existing: Object.fromEntries(others) }));
    } else {
      io.out(`enqueued ${added} new job${added === 1 ? '' : 's'} on ${values.queue}` +
        (others.length ? `; ${jobs.length - added} already there (${others.map(([s, n]) => `${s} ${n}`).join(', ')})` : ''));
    }
    if (!values.wait) return EXIT_OK;

    const inputOf = new Map(jobs.map((j) => [j.id, j.input]));
    const groupsOf = new Map(jobs.filter((j) => j.inputs).map((j) => [j.id, j.inputs!]));
    const ids = [...new Set(jobs.map((j) => j.id))];
    let lastLine = 0;
    const outcome = await waitForJobs(queue, connection, ids, {
      ...(groupsOf.size ? { groups: groupsOf } : {}),
      ...(io.signal ? { signal: io.signal } : {}),
      onProgress: (p) => {
        const eta = p.etaSeconds === undefined ? '-' : clock(p.etaSeconds);
        const text = `done ${p.completed}/${p.total}, failed ${p.failed}, ${p.rate.toFixed(2)} images/s, ETA ${eta} ` +
          `(queue: waiting ${p.queue.waiting}, active ${p.queue.active}, delayed ${p.queue.delayed})`;
        if (io.tty && !json) io.progress(`\r\x1b[2K${text}`);
        else if (Date.now() - lastLine >= progressS * 1000 || p.completed + p.failed === p.total) {
          lastLine = Date.now();
          if (json) io.out(JSON.stringify({ type: 'progress', ...p }));
          else io.err(text);
        }
      },
    });
    if (io.tty && !json) io.progress('\r\x1b[2K');
    if (io.signal?.aborted) {
      io.err('tessera enqueue: stopped waiting (the jobs stay queued)');
      return 130;
    }
    for (const f of outcome.failed) {
      const input = f.input ?? inputOf.get(f.id);
      if (json) io.out(JSON.stringify({ type: 'failed', id: f.id, input, code: f.code, message: f.message }));
      else io.out(`failed ${input} ${f.code}: ${f.message}`);
    }
    const n = outcome.images;
    if (json) io.out(JSON.stringify({ type: 'done', jobs: ids.length, images: n.total, completed: n.completed, failed: n.failed }));
    else io.out(`done: ${n.completed} of ${n.total} completed, ${n.failed} failed` + (groupsOf.size ? ` (images, in ${ids.length} group jobs)` : ''));
    return outcome.failed.length ? EXIT_SOME_FAILED : EXIT_OK;
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera enqueue: ${err.code}: ${err.message}`);
    return err.code === 'ERR_INVALID_ARGUMENT' ? EXIT_USAGE : EXIT_SOME_FAILED;
  } finally {
    await queue.close().catch(() => undefined);
    await connection.quit().catch(() => connection.disconnect());
  }
}
