// A job's http(s) input, fetched with Node's fetch into memory, bounded: a declared
// Content-Length over the limit is refused before the body is read, and a body that runs past it
// is cut off. Failures are TesseraErrors classified for the retry policy (src/fleet/job.ts): what
// is about the input (a 4xx answer: the image is not there; too large) is permanent, what may pass
// (a network error, a timeout, 5xx, 408, 429) is ERR_IO and retried. loadJobInput is the bulk
// runner's loader for a job's inputs: a URL is fetched and stamped by its bytes, a path is a file.
import { loadFile, stampOfBytes, type InputLoader } from '../bulk/index.js';
import { TesseraError } from '../errors.js';

/** Whether a job input is an http(s) URL (fetched) rather than a path (read from shared storage). */
export function isHttpUrl(input: string): boolean {
  return /^https?:\/\//i.test(input);
}

/** 64 MiB: far above any page scan, far below what would hurt a worker's memory. */
export const DEFAULT_MAX_FETCH_BYTES = 64 * 1024 * 1024;
export const DEFAULT_FETCH_TIMEOUT_MS = 30_000;

export interface FetchLimits {
  maxBytes?: number;
  timeoutMs?: number;
}

const RETRYABLE_STATUS = new Set([408, 425, 429]);

export async function fetchInput(url: string, limits: FetchLimits = {}): Promise<Buffer> {
  const maxBytes = limits.maxBytes ?? DEFAULT_MAX_FETCH_BYTES;
  const timeoutMs = limits.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  let res: Response;
  try {
    res = await fetch(url, { redirect: 'follow', signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    const why = (e as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : ((e as { cause?: Error }).cause?.message ?? (e as Error).message);
    throw new TesseraError('ERR_IO', `cannot fetch image ${url}: ${why}`, { cause: e });
  }
  if (!res.ok) {
    await res.body?.cancel().catch(() => undefined);
    const what = `cannot fetch image ${url}: HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
    // A 4xx says the request (the URL) is wrong: the same as a missing file (ERR_IMAGE_DECODE).
    throw new TesseraError(res.status >= 500 || RETRYABLE_STATUS.has(res.status) ? 'ERR_IO' : 'ERR_IMAGE_DECODE', what);
  }
  const declared = Number(res.headers.get('content-length') ?? NaN);
  const tooLarge = (n: string) => new TesseraError('ERR_IMAGE_TOO_LARGE', `image ${url} is ${n} bytes, over the fetch limit of ${maxBytes} bytes`);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge(String(declared));
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    if (res.body) {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        total += chunk.byteLength;
        if (total > maxBytes) throw tooLarge(`more than ${maxBytes}`);
        chunks.push(chunk);
      }
    }
  } catch (e) {
    await res.body?.cancel().catch(() => undefined);
    if (e instanceof TesseraError) throw e;
    throw new TesseraError('ERR_IO', `cannot fetch image ${url}: the body broke off after ${total} bytes (${(e as Error).message})`, { cause: e });
  }
  return Buffer.concat(chunks, total);
}

/** The runner's loader for job inputs (src/bulk/runner.ts): URLs fetched within `limits`, paths read as files. */
export function loadJobInput(limits: FetchLimits = {}): InputLoader {
  return async (input, how) => {
    if (!isHttpUrl(input.path)) return loadFile(input, how);
    const bytes = await fetchInput(input.path, limits);
    return { image: bytes, stamp: stampOfBytes(bytes) };
  };
}
