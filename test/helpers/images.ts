// Shared by the image/preprocess tests: fixture paths and a minimal safetensors reader (the
// fixtures' pixel_values_u8 / pixel_values / image_grid_thw / positions).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));
export const IMAGES = FIXTURES + 'images/';

export interface Tensor {
  dtype: string;
  shape: number[];
  bytes: Uint8Array;
}

export function readSafetensors(path: string): Record<string, Tensor> {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const base = 8 + n;
  const out: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    // Copy so that typed views over the bytes are aligned.
    const bytes = new Uint8Array(buf.subarray(base + t.data_offsets[0], base + t.data_offsets[1]));
    out[name] = { dtype: t.dtype, shape: t.shape, bytes };
  }
  return out;
}

export function asFloat32(t: Tensor): Float32Array {
  if (t.dtype !== 'F32') throw new Error(`expected F32, got ${t.dtype}`);
  return new Float32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 4);
}

export function asInt64Numbers(t: Tensor): number[] {
  if (t.dtype !== 'I64') throw new Error(`expected I64, got ${t.dtype}`);
  const v = new BigInt64Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 8);
  return Array.from(v, (x) => Number(x));
}

export function readJson<T = unknown>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}
