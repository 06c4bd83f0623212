// `tessera enqueue <inputs...> --redis URL --queue NAME [--wait]` (docs/fleet.md): one job per image
// (files, folders, `-` for a list on stdin, http(s) URLs), or with --group N one job per N images
// (in the order they are listed), each under an id derived from its inputs, options and output
// names, so enqueuing the same work twice adds nothing. --wait follows the jobs
// to the end with a progress line (done, failed, rate, ETA) and exits 0 when all completed, 1 when
// some failed (each listed with its code). Usage errors, inputs that cannot be jobs (another URL
// scheme, outputs that collide) and Redis failures exit 2 with one `CODE: message` line; adding
// fails fast on a lost connection (saying how many jobs are queued), --wait waits an outage out.
import { toTesseraError } from '../errors.js';
import { JobOptionsSchema, type JobOptions } from '../fleet/job-data.js';
import { parseArgument } from '../options.js';
import { checkQueueName } from '../fleet/queue-name.js';
import { ENQUEUE } from './commands.js';
import { flagged, parseFlags, usageOf, UsageError } from './flags.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, type CliIo } from './io.js';
import { listJobInputs } from '../fleet/inputs.js';
import { checkFleetPackages } from '../fleet/peer-deps.js';

export const ENQUEUE_USAGE = usageOf(ENQUEUE);


function clock(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

export async function enqueueCommand(args: readonly string[], io: CliIo, stdin: () => Promise<string>): Promise<number> {
  let values: { redis: string; queue: string; wait?: boolean; json?: boolean; exclude?: string[]; group?: number; attempts?: number; backoffMs?: number; progressInterval?: number };
  let positionals: string[];
  let options: JobOptions;
  try {
    const parsed = parseFlags(ENQUEUE, args);
    if (parsed.help) {
      io.out(ENQUEUE_USAGE);
      return EXIT_OK;
    }
    values = parsed.groups['cli'] as typeof values;
    positionals = parsed.positionals;
    checkQueueName(values.queue);
    if (positionals.length === 0) throw new UsageError('no inputs given');
    // The job's options, checked by the schema the worker checks them with.
    options = flagged(() => parseArgument(JobOptionsSchema, parsed.groups['job'] ?? {}, 'tessera enqueue'), ENQUEUE);
  } catch (e) {
    io.err(`tessera enqueue: ${(e as Error).message}\n${ENQUEUE_USAGE}`);
    return EXIT_USAGE;
  }
  const json = values.json ?? false;
  const group = values.group ?? 1;
  const progressS = values.progressInterval ?? 5;
  const { attempts, backoffMs } = values;

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

  if (!(await checkFleetPackages('tessera enqueue', (line) => io.err(line)))) return EXIT_USAGE;
  const { Queue } = await import('bullmq');
  const { connectRedis, reachRedis } = await import('../fleet/connection.js');
  const { redisFailure } = await import('../fleet/redis-errors.js');
  const { enqueueImages, enqueueGroups } = await import('../fleet/enqueue.js');
  const { waitForJobs } = await import('../fleet/wait.js');
  const redisUrl = values.redis;
  const queueName = values.queue;
  // Adding fails fast (no reconnect): a lost connection says how many jobs were queued.
  let connection;
  try {
    connection = connectRedis(redisUrl, 'tessera-enqueue', { reconnect: false });
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera enqueue: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  const opened: { close(): Promise<unknown> }[] = [];
  const quit = (c: typeof connection) => c.quit().catch(() => c.disconnect());
  // SIGTERM / SIGINT while adding: the connection is cut, so the add stops and says how far it got.
  const cut = () => connection.disconnect();
  io.signal?.addEventListener('abort', cut, { once: true });
  try {
    await reachRedis(connection, redisUrl, { signal: io.signal });
    const queue = new Queue(queueName, { connection });
    queue.on('error', () => undefined);
    opened.push(queue);
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
    io.signal?.removeEventListener('abort', cut);
    if (!values.wait) return EXIT_OK;

    // Waiting rides out a lost Redis: its own connection reconnects forever (docs/fleet.md#failures).
    const waitConnection = connectRedis(redisUrl, 'tessera-enqueue-wait');
    opened.push({ close: () => quit(waitConnection) });
    await reachRedis(waitConnection, redisUrl, { signal: io.signal });
    const waitQueue = new Queue(queueName, { connection: waitConnection });
    waitQueue.on('error', () => undefined);
    opened.unshift(waitQueue);

    const inputOf = new Map(jobs.map((j) => [j.id, j.input]));
    const groupsOf = new Map(jobs.filter((j) => j.inputs).map((j) => [j.id, j.inputs!]));
    const ids = [...new Set(jobs.map((j) => j.id))];
    let lastLine = 0;
    const outcome = await waitForJobs(waitQueue, waitConnection, ids, {
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
    const err = redisFailure(e, redisUrl);
    if (err.code === 'ERR_ABORTED' || io.signal?.aborted) {
      io.err(`tessera enqueue: stopped: ${err.message}`);
      return EXIT_INTERRUPTED;
    }
    io.err(`tessera enqueue: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  } finally {
    io.signal?.removeEventListener('abort', cut);
    for (const o of opened) await o.close().catch(() => undefined);
    await quit(connection);
  }
}
