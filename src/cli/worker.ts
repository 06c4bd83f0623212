// `tessera worker --redis URL --queue NAME --model PATH --out-dir DIR` (docs/fleet.md): takes image
// jobs from a BullMQ queue until stopped, one at a time, with one tower opened at start. One log
// line per job outcome (JSON Lines with --json). SIGTERM or SIGINT: the job in hand finishes, then
// exit 0; a second signal ends the process at once (its job goes back to the queue once its lock
// runs out).
import { parseArgs } from 'node:util';
import { toTesseraError } from '../errors.js';
import type { OpenOptions } from '../tower.js';
import { EXIT_OK, EXIT_USAGE, type CliIo } from './io.js';
import type { ImageJobResult } from '../fleet/job.js';

export const WORKER_USAGE = `usage: tessera worker --redis URL --queue NAME --model PATH --out-dir DIR [--name NAME] [--json]
                      [--backend auto|cpu|metal|metal-emulated] [--residency auto|stream|mapped|resident] [--threads N]
                      [--precision f32|bf16]
                      [--lock-duration MS] [--stalled-interval MS] [--max-stalled N] [--max-fetch-bytes N]
Runs until SIGTERM/SIGINT, which finish the current job and exit 0.`;

class UsageError extends Error {}

function positiveInt(name: string, v: string | undefined, min = 1): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min) throw new UsageError(`--${name} must be an integer >= ${min} (got '${v}')`);
  return n;
}

export async function workerCommand(args: readonly string[], io: CliIo): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...args],
      strict: true,
      options: {
        redis: { type: 'string' },
        queue: { type: 'string' },
        model: { type: 'string' },
        'out-dir': { type: 'string' },
        name: { type: 'string' },
        json: { type: 'boolean' },
        backend: { type: 'string' },
        residency: { type: 'string' },
        threads: { type: 'string' },
        precision: { type: 'string' },
        'lock-duration': { type: 'string' },
        'stalled-interval': { type: 'string' },
        'max-stalled': { type: 'string' },
        'max-fetch-bytes': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
    if (values.help) {
      io.out(WORKER_USAGE);
      return EXIT_OK;
    }
    for (const k of ['redis', 'queue', 'model', 'out-dir'] as const) if (!values[k]) throw new UsageError(`--${k} is required`);
  } catch (e) {
    io.err(`tessera worker: ${(e as Error).message}\n${WORKER_USAGE}`);
    return EXIT_USAGE;
  }
  const json = values.json ?? false;
  const open: OpenOptions = {};
  let numbers;
  try {
    if (values.backend) open.backend = values.backend as OpenOptions['backend'];
    if (values.residency) open.residency = values.residency as OpenOptions['residency'];
    const threads = positiveInt('threads', values.threads, 0);
    if (threads !== undefined) open.threads = threads;
    if (values.precision) open.precision = values.precision as OpenOptions['precision'];
    numbers = {
      lockDurationMs: positiveInt('lock-duration', values['lock-duration']),
      stalledIntervalMs: positiveInt('stalled-interval', values['stalled-interval']),
      maxStalledCount: positiveInt('max-stalled', values['max-stalled'], 0),
      maxFetchBytes: positiveInt('max-fetch-bytes', values['max-fetch-bytes']),
    };
  } catch (e) {
    io.err(`tessera worker: ${(e as Error).message}\n${WORKER_USAGE}`);
    return EXIT_USAGE;
  }

  const { createWorker } = await import('../fleet/worker.js');
  const log = (text: string, record: Record<string, unknown>) => io.out(json ? JSON.stringify({ time: new Date().toISOString(), ...record }) : `${new Date().toISOString()} ${text}`);
  let lastError = { message: '', at: 0 };
  let fleet;
  try {
    fleet = await createWorker({
      redis: values.redis!,
      queue: values.queue!,
      model: values.model!,
      open,
      outDir: values['out-dir']!,
      ...(values.name ? { name: values.name } : {}),
      ...(numbers.lockDurationMs ? { lockDurationMs: numbers.lockDurationMs } : {}),
      ...(numbers.stalledIntervalMs ? { stalledIntervalMs: numbers.stalledIntervalMs } : {}),
      ...(numbers.maxStalledCount !== undefined ? { maxStalledCount: numbers.maxStalledCount } : {}),
      ...(numbers.maxFetchBytes ? { fetch: { maxBytes: numbers.maxFetchBytes } } : {}),
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
        io.err(`tessera worker: ${err.message}`);
      },
    });
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera worker: cannot start: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  const t = fleet.tower.info;
  log(`worker ${fleet.name} ready: queue ${values.queue}, model ${values.model} (${t.family}, backend ${t.backend}, residency ${t.residency}), out-dir ${values['out-dir']}`, {
    type: 'worker', event: 'ready', name: fleet.name, pid: process.pid, queue: values.queue, model: values.model, family: t.family, outDir: values['out-dir'],
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
