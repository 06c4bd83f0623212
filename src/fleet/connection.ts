// The Redis connection of a worker, enqueuer or status reader: one ioredis client from a
// redis:// or rediss:// URL. BullMQ needs maxRetriesPerRequest null (a blocked command must wait
// out a lost connection instead of failing), and the client reconnects forever with a capped
// delay, so a Redis restart is waited out, not fatal (docs/fleet.md#failures). A connection made
// with `reconnect: false` does the opposite: a lost connection fails every pending command at
// once (enqueue while adding, queue-status), and a command Redis does not answer times out.
import { Redis } from 'ioredis';
import { TesseraError } from '../errors.js';
import { redisFailure, redisLabel } from './redis-errors.js';

const RECONNECT_MAX_MS = 2000;

/** How long a first contact may go unanswered (a host that drops packets) before the command gives up. */
export const FIRST_CONNECT_MS = 15_000;

export function checkRedisUrl(url: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `--redis ${url} is not a URL (redis://host:port or rediss://host:port)`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:')
    throw new TesseraError('ERR_INVALID_ARGUMENT', `--redis ${redisLabel(url)}: the scheme must be redis:// or rediss://, not ${u.protocol}//`);
}

export interface ConnectOptions {
  /** Reconnect after a lost connection, forever (default true). */
  reconnect?: boolean;
}

export function connectRedis(url: string, name?: string, opts: ConnectOptions = {}): Redis {
  checkRedisUrl(url);
  const reconnect = opts.reconnect ?? true;
  const client = new Redis(url, {
    ...(reconnect
      ? { maxRetriesPerRequest: null, retryStrategy: (times: number) => Math.min(100 * times, RECONNECT_MAX_MS) }
      : { maxRetriesPerRequest: 0, retryStrategy: () => null, commandTimeout: FIRST_CONNECT_MS }),
    ...(name ? { connectionName: name } : {}),
  });
  // Whoever uses the client reports its errors (or reconnects); without a listener ioredis
  // prints every failed reconnect as an "Unhandled error event" dump.
  client.on('error', () => undefined);
  return client;
}

/**
 * Resolves once `client` is ready. Rejects (ERR_IO naming the Redis) at once when the attempt
 * fails (connection refused, unknown host, a refused password), after `timeoutMs` when the host
 * never answers, and with ERR_ABORTED when `signal` fires.
 */
export function reachRedis(client: Redis, url: string, opts: { timeoutMs?: number; signal?: AbortSignal | undefined } = {}): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? FIRST_CONNECT_MS;
  if (client.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const done = (err?: TesseraError) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      client.off('end', onEnd);
      opts.signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const onReady = () => done();
    const onError = (e: unknown) => done(redisFailure(e, url));
    const onEnd = () => done(new TesseraError('ERR_IO', `cannot reach Redis at ${redisLabel(url)}: the connection closed`));
    const onAbort = () => done(new TesseraError('ERR_ABORTED', `stopped while connecting to Redis at ${redisLabel(url)}`));
    const timer = setTimeout(() => done(new TesseraError('ERR_IO', `cannot reach Redis at ${redisLabel(url)}: no answer within ${timeoutMs / 1000} s`)), timeoutMs);
    client.on('ready', onReady);
    client.on('error', onError);
    client.on('end', onEnd);
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
  });
}
