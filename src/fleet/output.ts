// Where a job's result goes: one file in the worker's --out-dir, written atomically (temp beside
// it, fsync, rename), and its SHA-256 for the job's return value. The same job always gives the
// same bytes (nothing time- or host-dependent is in the file), so a job run twice after a lost
// worker leaves one identical file.
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve, sep } from 'node:path';
import { TesseraError } from '../errors.js';
import { ioError } from '../io/io-error.js';
import type { EncodeResult } from '../tower.js';
import { writeFileAtomic } from '../cli/atomic-file.js';

export interface WrittenOutput {
  path: string;
  relative: string;
  sha256: string;
  bytes: number;
}

/** `name` (relative, without extension) resolved under outDir; refused if it climbs out of it. */
export function outputPathOf(outDir: string, name: string, extension: string): string {
  const root = resolve(outDir);
  const path = resolve(root, name + extension);
  const rel = relative(root, path);
  if (rel === '' || rel.startsWith('..' + sep) || rel === '..' || isAbsolute(rel))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `job output name ${name} is not inside the output folder ${outDir}`);
  return path;
}

function patchesOf(r: EncodeResult): number {
  if (r.grid) return r.grid.reduce((a, g) => a + g.t * g.h * g.w, 0);
  return (r.positions?.length ?? 0) / 2;
}

interface Tensor {
  name: string;
  dtype: 'F32' | 'I64';
  shape: number[];
  data: Float32Array | BigInt64Array;
}

function tensorsOf(r: EncodeResult): Tensor[] {
  const t: Tensor[] = [{ name: 'embeddings', dtype: 'F32', shape: [r.tokens, r.width], data: r.embeddings }];
  if (r.grid) t.push({ name: 'grid_thw', dtype: 'I64', shape: [r.grid.length, 3], data: BigInt64Array.from(r.grid.flatMap((g) => [g.t, g.h, g.w]), (v) => BigInt(v)) });
  if (r.positions) t.push({ name: 'positions', dtype: 'I64', shape: [r.positions.length / 2, 2], data: BigInt64Array.from(r.positions, (v) => BigInt(v)) });
  for (const [k, d] of (r.deepstack ?? []).entries()) t.push({ name: `deepstack.${k}`, dtype: 'F32', shape: [r.tokens, d.length / r.tokens], data: d });
  const patches = patchesOf(r);
  for (const [name, d] of Object.entries(r.stages ?? {})) {
    const rows = name === 'embed' || name.startsWith('block.') ? patches : r.tokens;
    t.push({ name: `stage.${name}`, dtype: 'F32', shape: rows > 0 && d.length % rows === 0 ? [rows, d.length / rows] : [d.length], data: d });
  }
  return t;
}

function safetensorsBytes(tensors: readonly Tensor[], metadata: Record<string, string>): Buffer {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - ((8 + Buffer.byteLength(text)) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  return Buffer.concat([len, Buffer.from(text), ...tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))]);
}

/** Writes one image's result as `<outDir>/<name>.safetensors`. */
export async function writeImageOutput(outDir: string, name: string, r: EncodeResult, metadata: Record<string, string>): Promise<WrittenOutput> {
  const path = outputPathOf(outDir, name, '.safetensors');
  const bytes = safetensorsBytes(tensorsOf(r), metadata);
  try {
    await mkdir(dirname(path), { recursive: true });
  } catch (e) {
    throw ioError(dirname(path), 'cannot create output folder', e);
  }
  await writeFileAtomic(path, bytes);
  return { path, relative: relative(resolve(outDir), path), sha256: createHash('sha256').update(bytes).digest('hex'), bytes: bytes.length };
}
