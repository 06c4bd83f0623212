// What went wrong with Redis, as a TesseraError a user can act on. ioredis and BullMQ report
// connection trouble as bare Errors (an errno, "Connection is closed.", "Command aborted due to
// connection close", a reply such as NOAUTH); the fleet commands turned them into ERR_INTERNAL or
// printed them raw. Every Redis failure is ERR_IO (the system refused a read or write, here over
// the network), with the Redis named by a URL whose password is masked.
import { TesseraError } from '../errors.js';

/** The URL with its password (if any) masked: messages end up in logs. */
export function redisLabel(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}

/** Errors a connection attempt ends with at once (the errno ioredis passes on). */
const CONNECT_ERRNOS: Record<string, string> = {
  ECONNREFUSED: 'connection refused (nothing listens on that port)',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be resolved now',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'no answer',
};

/** Errors of a connection that was up. */
const LOST_ERRNOS = new Set(['ECONNRESET', 'EPIPE']);

/** True when `err` says the connection itself failed or broke (as opposed to a reply Redis gave). */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; name?: unknown; message?: unknown } | undefined;
  if (typeof e?.code === 'string' && (e.code in CONNECT_ERRNOS || LOST_ERRNOS.has(e.code))) return true;
  // ioredis: "Connection is closed." (no reconnect), AbortError ("Command aborted due to connection
  // close"), MaxRetriesPerRequestError (an AbortError too); "Command timed out" (commandTimeout).
  return e?.name === 'AbortError' || e?.name === 'MaxRetriesPerRequestError' || /Connection is closed|Command timed out|Stream isn't writeable/i.test(String(e?.message ?? ''));
}

/**
 * `err` (anything ioredis or BullMQ threw or emitted) as ERR_IO naming the Redis. A TesseraError
 * passes through unchanged.
 */
export function redisFailure(err: unknown, url?: string): TesseraError {
  if (err instanceof TesseraError) return err;
  const e = err as { code?: unknown; name?: unknown; message?: unknown } | undefined;
  const at = url ? ` at ${redisLabel(url)}` : '';
  const message = String(e?.message ?? err);
  const errno = typeof e?.code === 'string' ? e.code : undefined;
  if (errno && errno in CONNECT_ERRNOS) return new TesseraError('ERR_IO', `cannot reach Redis${at}: ${CONNECT_ERRNOS[errno]} (${errno})`, { cause: err });
  if (isConnectionError(err)) return new TesseraError('ERR_IO', `lost the connection to Redis${at} (${message})`, { cause: err });
  if (e?.name === 'ReplyError') return new TesseraError('ERR_IO', `Redis${at} answered: ${message}`, { cause: err });
  return new TesseraError('ERR_IO', `Redis${at}: ${message}`, { cause: err });
}

/** Replies that say Redis is busy for now (loading its data, a failover), not that the request is wrong. */
const PASSING_REPLIES = /^(LOADING|BUSY|TRYAGAIN|MASTERDOWN|READONLY|CLUSTERDOWN)\b/;

/**
 * A reply error waiting will not cure (a refused password, a missing permission, a command the
 * server does not know): a worker waiting for Redis at start ends on one instead of waiting forever.
 */
export function isLastingReplyError(err: unknown): boolean {
  const e = err as { name?: unknown; message?: unknown } | undefined;
  return e?.name === 'ReplyError' && !PASSING_REPLIES.test(String(e.message ?? ''));
}
