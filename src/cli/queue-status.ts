// `tessera queue-status --redis URL --queue NAME [--json]`: job counts, failures by code, the
// last minute's rate and each worker's counters (src/fleet/status.ts). A question, not a service:
// it answers or says why, at once (a refused connection, a lost one, a Redis error: ERR_IO, exit 2).
import { toTesseraError } from '../errors.js';
import { checkFleetPackages } from '../fleet/peer-deps.js';
import { checkQueueName } from '../fleet/queue-name.js';
import { QUEUE_STATUS } from './commands.js';
import { parseFlags, usageOf } from './flags.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, table, type CliIo } from './io.js';

export const QUEUE_STATUS_USAGE = usageOf(QUEUE_STATUS);

export async function queueStatusCommand(args: readonly string[], io: CliIo): Promise<number> {
  let values: { redis: string; queue: string; json?: boolean };
  try {
    const { help, groups } = parseFlags(QUEUE_STATUS, args);
    if (help) {
      io.out(QUEUE_STATUS_USAGE);
      return EXIT_OK;
    }
    values = groups['cli'] as typeof values;
    checkQueueName(values.queue);
  } catch (e) {
    io.err(`tessera queue-status: ${(e as Error).message}\n${QUEUE_STATUS_USAGE}`);
    return EXIT_USAGE;
  }
  if (!(await checkFleetPackages('tessera queue-status', (line) => io.err(line)))) return EXIT_USAGE;
  const { Queue } = await import('bullmq');
  const { connectRedis, reachRedis } = await import('../fleet/connection.js');
  const { redisFailure } = await import('../fleet/redis-errors.js');
  const { queueStatus } = await import('../fleet/status.js');
  let connection;
  try {
    connection = connectRedis(values.redis, 'tessera-queue-status', { reconnect: false });
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera queue-status: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  const cut = () => connection.disconnect();
  io.signal?.addEventListener('abort', cut, { once: true });
  let queue: { close(): Promise<void> } | undefined;
  try {
    await reachRedis(connection, values.redis, { signal: io.signal });
    const q = new Queue(values.queue, { connection });
    q.on('error', () => undefined);
    queue = q;
    const s = await queueStatus(q);
    if (values.json) {
      io.out(JSON.stringify(s));
      return EXIT_OK;
    }
    const c = s.counts;
    io.out(`queue ${s.queue}: waiting ${c.waiting}, active ${c.active}, delayed ${c.delayed}, completed ${c.completed}, failed ${c.failed}; ` +
      `${s.ratePerSecond.toFixed(2)} jobs/s over the last minute; ${s.connectedWorkers} worker connection${s.connectedWorkers === 1 ? '' : 's'}`);
    const codes = Object.entries(s.failures);
    if (codes.length) io.out(`failures: ${codes.map(([k, n]) => `${k} ${n}`).join(', ')}`);
    if (s.workers.length) {
      const rows = s.workers.map((w) => [w.name, String(w.jobs), String(w.images), w.imagesPerSecond.toFixed(2),
        Object.entries(w.failures).map(([k, n]) => `${k} ${n}`).join(', ') || '-', new Date(w.lastJobAt).toISOString()]);
      for (const l of table(['worker', 'jobs', 'images', 'images/s', 'failed attempts', 'last job'], rows, [false, true, true, true, false, false])) io.out(l);
    }
    return EXIT_OK;
  } catch (e) {
    const err = redisFailure(e, values.redis);
    io.err(`tessera queue-status: ${io.signal?.aborted ? 'stopped: ' : ''}${err.code}: ${err.message}`);
    return io.signal?.aborted ? EXIT_INTERRUPTED : EXIT_USAGE;
  } finally {
    io.signal?.removeEventListener('abort', cut);
    await queue?.close().catch(() => undefined);
    await connection.quit().catch(() => connection.disconnect());
  }
}
