// `tessera worker --redis URL --queue NAME --model PATH --out-dir DIR` (docs/fleet.md): takes image
// jobs from a BullMQ queue until stopped, one at a time, with one tower opened at start. One log
// line per job outcome (JSON Lines with --json). SIGTERM or SIGINT: the job in hand finishes, then
// exit 0; a second signal ends the process at once (its job goes back to the queue once its lock
// runs out).
import { toTesseraError } from '../errors.js';
import type { OpenOptions } from '../tower.js';
import { OpenOptionsSchema, parseArgument } from '../options.js';
import { checkQueueName } from '../fleet/queue-name.js';
import { WORKER } from './commands.js';
import { flagged, parseFlags, usageOf } from './flags.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, type CliIo } from './io.js';
import type { FetchLimits } from '../fleet/fetch-input.js';
import type { ImageJobResult } from '../fleet/job.js';
import { checkFleetPackages } from '../fleet/peer-deps.js';

export const WORKER_USAGE = usageOf(WORKER);

export async function workerCommand(args: readonly string[], io: CliIo): Promise<number> {
  let cli: Record<string, unknown>, open: OpenOptions, worker: Record<string, number>, fetch: FetchLimits;
  try {
    const { help, groups } = parseFlags(WORKER, args);
    if (help) {
      io.out(WORKER_USAGE);
      return EXIT_OK;
    }
    cli = groups['cli'] ?? {};
    open = flagged(() => parseArgument(OpenOptionsSchema, groups['open'] ?? {}, 'tessera worker'), WORKER);
    worker = (groups['worker'] ?? {}) as Record<string, number>;
    fetch = (groups['fetch'] ?? {}) as FetchLimits;
    checkQueueName(cli['queue'] as string);
  } catch (e) {
    io.err(`tessera worker: ${(e as Error).message}\n${WORKER_USAGE}`);
    return EXIT_USAGE;
  }
  const values = cli as { redis: string; queue: string; model: string; outDir: string; name?: string; json?: boolean };
  const json = values.json ?? false;

  if (!(await checkFleetPackages('tessera worker', (line) => io.err(line)))) return EXIT_USAGE;
  const { createWorker } = await import('../fleet/worker.js');
  const { isConnectionError, redisFailure } = await import('../fleet/redis-errors.js');
  const log = (text: string, record: Record<string, unknown>) => io.out(json ? JSON.stringify({ time: new Date().toISOString(), ...record }) : `${new Date().toISOString()} ${text}`);
  let lastError = { message: '', at: 0 };
  let fleet;
  try {
    fleet = await createWorker({
      redis: values.redis,
      queue: values.queue,
      model: values.model,
      open,
      outDir: values.outDir,
      ...(values.name ? { name: values.name } : {}),
      ...worker,
      fetch,
      ...(io.signal ? { signal: io.signal } : {}),
      onEvent: (e) => {
        if (e.type === 'completed' && 'group' in e.result) {
          const r = e.result;
          const failed = r.images.filter((i) => i.error).map((i) => `${i.input} ${i.error!.code}`);
          log(
            `completed ${e.jobId} group of ${r.images.length}: ${r.encoded} encoded, ${r.skipped} skipped, ${r.failed} failed${failed.length ? ` (${failed.join(', ')})` : ''} ` +
              `${r.timings.totalMs.toFixed(0)} ms (attempt ${e.attempt}; worker: ${r.worker.jobs} jobs, ${r.worker.imagesPerSecond.toFixed(2)} images/s)`,
            { type: 'job', event: 'completed', jobId: e.jobId, attempt: e.attempt, ...r },
          );
        } else if (e.type === 'completed') {
          const r = e.result as ImageJobResult;
          log(
            `completed ${e.jobId} ${r.input} -> ${r.output} ${r.tokens} tokens ${r.timings.totalMs.toFixed(0)} ms ` +
              `(attempt ${e.attempt}; worker: ${r.worker.jobs} jobs, ${r.worker.imagesPerSecond.toFixed(2)} images/s)`,
            { type: 'job', event: 'completed', jobId: e.jobId, attempt: e.attempt, ...r },
          );
        } else {
          log(`failed ${e.jobId} ${e.input} ${e.code}: ${e.message} (attempt ${e.attempt}, ${e.final ? 'final' : 'will retry'})`, {
            type: 'job', event: 'failed', jobId: e.jobId, attempt: e.attempt, input: e.input, ...(e.inputs ? { inputs: e.inputs } : {}), code: e.code, message: e.message, final: e.final, worker: e.worker,
          });
        }
      },
      onError: (err) => {
        // The same message once per 5 s: a Redis outage would otherwise print a line per
        // reconnect attempt (ioredis reconnects by itself).
        if (err.message === lastError.message && Date.now() - lastError.at < 5000) return;
        lastError = { message: err.message, at: Date.now() };
        io.err(`tessera worker: ${isConnectionError(err) ? `${redisFailure(err, values.redis!).message}; reconnecting` : err.message}`);
      },
    });
  } catch (e) {
    const err = toTesseraError(e);
    if (err.code === 'ERR_ABORTED') {
      io.err(`tessera worker: ${err.message}`);
      return EXIT_INTERRUPTED;
    }
    io.err(`tessera worker: cannot start: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  const t = fleet.tower.info;
  log(`worker ${fleet.name} ready: queue ${values.queue}, model ${values.model} (${t.family}, backend ${t.backend}, residency ${t.residency}), out-dir ${values.outDir}`, {
    type: 'worker', event: 'ready', name: fleet.name, pid: process.pid, queue: values.queue, model: values.model, family: t.family, outDir: values.outDir,
  });

  // Runs until the first SIGTERM/SIGINT (io.signal); processIo exits at once on a second one.
  await new Promise<void>((resolve) => {
    if (io.signal?.aborted) resolve();
    io.signal?.addEventListener('abort', () => resolve(), { once: true });
  });
  log(`worker ${fleet.name} stopping: finishing the current job`, { type: 'worker', event: 'stopping', name: fleet.name });
  await fleet.close();
  const s = fleet.counters.snapshot();
  log(`worker ${fleet.name} stopped: ${s.jobs} jobs, ${s.images} images, ${s.imagesPerSecond.toFixed(2)} images/s, failures ${JSON.stringify(s.failures)}`, {
    type: 'worker', event: 'stopped', ...s,
  });
  return EXIT_OK;
}
