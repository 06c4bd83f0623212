// `tessera queue-status --redis URL --queue NAME [--json]`: job counts, failures by code, the
// last minute's rate and each worker's counters (src/fleet/status.ts).
import { toTesseraError } from '../errors.js';
import { requireFleetPackages } from '../fleet/peer-deps.js';
import { QUEUE_STATUS } from './commands.js';
import { parseFlags, usageOf } from './flags.js';
import { EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, table, type CliIo } from './io.js';

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
  } catch (e) {
    io.err(`tessera queue-status: ${(e as Error).message}\n${QUEUE_STATUS_USAGE}`);
    return EXIT_USAGE;
  }
  try {
    await requireFleetPackages('tessera queue-status');
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera queue-status: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  const { Queue } = await import('bullmq');
  const { connectRedis } = await import('../fleet/connection.js');
  const { queueStatus } = await import('../fleet/status.js');
  let connection;
  try {
    connection = connectRedis(values.redis, 'tessera-queue-status');
  } catch (e) {
    io.err(`tessera queue-status: ${toTesseraError(e).message}`);
    return EXIT_USAGE;
  }
  // A status query should answer or say why, not wait forever for a Redis that is down.
  connection.options.maxRetriesPerRequest = 3;
  const queue = new Queue(values.queue, { connection });
  try {
    const s = await queueStatus(queue);
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
    const err = toTesseraError(e, 'ERR_IO');
    io.err(`tessera queue-status: ${err.code}: ${err.message}`);
    return EXIT_SOME_FAILED;
  } finally {
    await queue.close().catch(() => undefined);
    await connection.quit().catch(() => connection.disconnect());
  }
}
