// What a job reports of each image it ran through the bulk runner (src/bulk/runner.ts): the image's
// output, as written (or found up to date) by the one writer of --out-dir outputs, so a fleet's files
// are byte for byte those of `tessera encode --out-dir`, with the SHA-256 and size of its main file.
// The record is deterministic (model, options, format, input size and mtime, or the fetched bytes'
// SHA-256 for a URL), so a job run twice writes the same bytes twice.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { BulkInput, BulkOutcome } from '../bulk/index.js';
import { ioError } from '../io/io-error.js';
import { jobFailure } from './failure-class.js';
import { isHttpUrl } from './url-policy.js';
import type { GroupImageResult } from './job.js';

export async function sha256OfFile(path: string): Promise<{ sha256: string; bytes: number }> {
  try {
    const data = await readFile(path);
    return { sha256: createHash('sha256').update(data).digest('hex'), bytes: data.length };
  } catch (e) {
    throw ioError(path, 'cannot read back', e);
  }
}

/** The rel of an input given without one: its base name (a URL: its path). */
export function defaultRel(input: string): string {
  if (isHttpUrl(input)) {
    let pathname = '';
    try {
      pathname = new URL(input).pathname;
    } catch {
      // not a valid URL: the schema refuses it by its own rule
    }
    // Each segment decoded on its own (a malformed %-sequence stays as written, it is not fatal).
    const decode = (p: string) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    };
    const path = pathname.split('/').map(decode).filter((p) => p && p !== '.' && p !== '..');
    return path.length ? path.join('/') : 'index';
  }
  return input.split(/[\\/]/).filter(Boolean).pop() ?? 'image';
}

/** A job's input as the bulk runner takes it (root is where enqueue found it; only rel shapes the output path). */
export function jobInput(input: string, rel: string | undefined): BulkInput {
  return { path: input, root: '', rel: rel ?? defaultRel(input) };
}

/** One image's entry in a job's result, from its runner outcome (a main file that cannot be read back fails the image). */
export async function imageResult(o: BulkOutcome): Promise<GroupImageResult> {
  const input = o.input.path;
  const failed = (e: unknown): GroupImageResult => {
    const err = jobFailure(e);
    return { input, status: 'failed', error: { code: err.code, message: err.message } };
  };
  if (o.status === 'failed') return failed(o.error);
  const output = o.output!;
  let sum;
  try {
    sum = await sha256OfFile(output);
  } catch (e) {
    return failed(e);
  }
  const t = o.status === 'encoded' ? o.result.timings : { decodeMs: 0, preprocessMs: 0, encodeMs: 0 };
  const writeMs = o.status === 'encoded' ? o.writeMs : 0;
  const tokens = o.status === 'encoded' ? o.result.tokens : o.tokens;
  const width = o.status === 'encoded' ? o.result.width : o.width;
  return {
    input,
    status: o.status,
    output,
    files: o.files!,
    ...sum,
    tokens,
    width,
    timings: { fetchMs: o.readMs, decodeMs: t.decodeMs, preprocessMs: t.preprocessMs, encodeMs: t.encodeMs, writeMs, totalMs: o.readMs + t.decodeMs + t.preprocessMs + t.encodeMs + writeMs },
  };
}
