// A job's output, through the one writer of --out-dir outputs (src/bulk/output-dir.ts), so a
// fleet's files are byte for byte those of `tessera encode --out-dir`: same paths, same tensors,
// same record. The record is deterministic (model, options, format, input size and mtime, or the
// fetched bytes' SHA-256 for a URL), so a job run twice writes the same bytes twice.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { primaryOutput, recordPath, type BulkInput, type InputStamp, type OutputJob } from '../bulk/index.js';
import { readSafetensorsMetadata } from '../bulk/formats/safetensors.js';
import { ioError } from '../io/io-error.js';
import { isHttpUrl } from './url-policy.js';

/** The input's stamp when it was fetched: its size and SHA-256 (a URL has no mtime). */
export function stampOfBytes(bytes: Uint8Array): InputStamp {
  return { size: bytes.byteLength, mtimeMs: 0, sha256: createHash('sha256').update(bytes).digest('hex') };
}

export async function sha256OfFile(path: string): Promise<{ sha256: string; bytes: number }> {
  try {
    const data = await readFile(path);
    return { sha256: createHash('sha256').update(data).digest('hex'), bytes: data.length };
  } catch (e) {
    throw ioError(path, 'cannot read back', e);
  }
}

/** Tokens, width and files of an up-to-date output, from its record. */
export async function existingOutput(job: OutputJob, input: BulkInput): Promise<{ tokens: number; width: number; files: string[] }> {
  const primary = primaryOutput(job, input);
  if (job.format === 'safetensors') {
    const meta = (await readSafetensorsMetadata(primary)) ?? {};
    return { tokens: Number(meta['tokens']), width: Number(meta['width']), files: [primary] };
  }
  const path = recordPath(job, input);
  const r = JSON.parse(await readFile(path, 'utf8')) as { record: Record<string, string>; files: string[] };
  return { tokens: Number(r.record['tokens']), width: Number(r.record['width']), files: [primary, path] };
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
