// The Redis connection of a worker, enqueuer or status reader: one ioredis client from a
// redis:// or rediss:// URL. BullMQ needs maxRetriesPerRequest null (a blocked command must wait
// out a lost connection instead of failing), and the client reconnects forever with a capped
// delay, so a Redis restart is waited out, not fatal (docs/fleet.md#failures).
import { Redis } from 'ioredis';
import { TesseraError } from '../errors.js';

const RECONNECT_MAX_MS = 2000;

export function checkRedisUrl(url: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `--redis ${url} is not a URL (redis://host:port or rediss://host:port)`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:')
    throw new TesseraError('ERR_INVALID_ARGUMENT', `--redis ${url}: the scheme must be redis:// or rediss://, not ${u.protocol}//`);
}

export function connectRedis(url: string, name?: string): Redis {
  checkRedisUrl(url);
  return new Redis(url, {
    maxRetriesPerRequest: null,
    retryStrategy: (times) => Math.min(100 * times, RECONNECT_MAX_MS),
    ...(name ? { connectionName: name } : {}),
  });
}
