// A job's http(s) input, fetched into memory, bounded: a declared Content-Length over the limit is
// refused before the body is read, a body that runs past it is cut off, and the whole fetch
// (redirects and body) has one timeout. Node's http/https rather than fetch: the socket must
// connect through the checked lookup of the URL policy (src/fleet/url-policy.ts), which refuses
// non-public addresses after DNS resolution at every redirect hop; redirects are followed here, at
// most MAX_REDIRECTS. No Accept-Encoding is sent and nothing is decompressed: the bytes counted are
// the bytes kept.
//
// Failures are TesseraErrors classified for the retry policy (src/fleet/failure-class.ts): what is
// about the input (a 4xx answer: the image is not there; too large; a refused address or scheme;
// too many redirects) is permanent, what may pass (a network error, a timeout, 5xx, 408, 425,
// 429) is ERR_IO and retried. loadJobInput is the bulk runner's loader for a job's inputs: a URL is
// fetched and stamped by its bytes, a path is a file.
import { loadFile, stampOfBytes, type InputLoader } from '../bulk/index.js';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { TesseraError } from '../errors.js';
import { checkFetchUrl, isHttpUrl, lookupFor, MAX_REDIRECTS, type UrlPolicy } from './url-policy.js';

/** 64 MiB: far above any page scan, far below what would hurt a worker's memory. */
export const DEFAULT_MAX_FETCH_BYTES = 64 * 1024 * 1024;
export const DEFAULT_FETCH_TIMEOUT_MS = 30_000;

export interface FetchLimits {
  maxBytes?: number;
  timeoutMs?: number;
  /**
   * Fetch from loopback, private, link-local and unique-local addresses too: true for all, or a
   * list of the addresses and CIDR subnets allowed (default false: all refused; docs/fleet.md#urls).
   */
  allowPrivateUrls?: boolean | readonly string[];
}

const RETRYABLE_STATUS = new Set([408, 425, 429]);
const REDIRECT_STATUS = new Set([301, 302, 303, 307, 308]);

/** One request; resolves with the response head (its body not yet read). */
function get(url: URL, policy: UrlPolicy, signal: AbortSignal): Promise<IncomingMessage> {
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    // agent: false, a connection of its own: a pooled socket would skip the checked lookup (one
    // made for a worker with another policy in the same process, say).
    const req = request(url, { method: 'GET', agent: false, signal, lookup: lookupFor(url.href, policy), headers: { accept: 'image/*,*/*;q=0.8', 'accept-encoding': 'identity' } }, resolve);
    req.once('error', reject);
    req.end();
  });
}

export async function fetchInput(url: string, limits: FetchLimits = {}): Promise<Buffer> {
  const maxBytes = limits.maxBytes ?? DEFAULT_MAX_FETCH_BYTES;
  const timeoutMs = limits.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS;
  const policy: UrlPolicy = { allowPrivateUrls: limits.allowPrivateUrls ?? false };
  const signal = AbortSignal.timeout(timeoutMs);
  const failed = (e: unknown, what: string) => {
    if (e instanceof TesseraError) return e;
    const why = signal.aborted ? `no answer within ${timeoutMs} ms` : ((e as NodeJS.ErrnoException).code ?? (e as Error).message);
    return new TesseraError('ERR_IO', `cannot fetch image ${url}: ${what}${why}`, { cause: e });
  };

  let res: IncomingMessage;
  let hop = url;
  for (let redirects = 0; ; redirects++) {
    const target = checkFetchUrl(hop, policy);
    try {
      res = await get(target, policy, signal);
    } catch (e) {
      throw failed(e, '');
    }
    const location = res.headers.location;
    if (!REDIRECT_STATUS.has(res.statusCode ?? 0) || !location) break;
    res.destroy();
    if (redirects === MAX_REDIRECTS) throw new TesseraError('ERR_INVALID_ARGUMENT', `cannot fetch image ${url}: more than ${MAX_REDIRECTS} redirects`);
    try {
      hop = new URL(location, target).href;
    } catch {
      throw new TesseraError('ERR_INVALID_ARGUMENT', `cannot fetch image ${url}: ${hop} redirects to an invalid URL (${location})`);
    }
  }

  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) {
    res.destroy();
    const what = `cannot fetch image ${url}: HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}${hop !== url ? ` (from ${hop})` : ''}`;
    // A 4xx says the request (the URL) is wrong: the same as a missing file (ERR_IMAGE_DECODE).
    throw new TesseraError(status >= 500 || RETRYABLE_STATUS.has(status) ? 'ERR_IO' : 'ERR_IMAGE_DECODE', what);
  }
  const declared = Number(res.headers['content-length'] ?? NaN);
  const tooLarge = (n: string) => new TesseraError('ERR_IMAGE_TOO_LARGE', `image ${url} is ${n} bytes, over the fetch limit of ${maxBytes} bytes`);
  if (Number.isFinite(declared) && declared > maxBytes) {
    res.destroy();
    throw tooLarge(String(declared));
  }
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) {
      total += chunk.byteLength;
      if (total > maxBytes) throw tooLarge(`more than ${maxBytes}`);
      chunks.push(chunk);
    }
  } catch (e) {
    res.destroy();
    throw failed(e, `the body broke off after ${total} bytes: `);
  }
  // A body shorter than its Content-Length: the connection broke off (Node ends the stream early).
  if (!res.complete) throw new TesseraError('ERR_IO', `cannot fetch image ${url}: the body broke off after ${total} bytes`);
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
