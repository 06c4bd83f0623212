// Test helpers: read whole safetensors fixture files and measure agreement the way the project
// defines it (max |ours - ref| / max |ref| over a stage).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));

export interface FixtureTensor {
  dtype: string;
  shape: number[];
  f32(): Float32Array;
  i64(): number[];
  u8(): Uint8Array;
}

export function readTensors(path: string): Record<string, FixtureTensor> {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const out: Record<string, FixtureTensor> = {};
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const bytes = buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]);
    const copy = () => new Uint8Array(bytes).buffer; // aligned copy
    out[name] = {
      dtype: h.dtype,
      shape: h.shape,
      f32: () => {
        if (h.dtype !== 'F32') throw new Error(`${name} is ${h.dtype}`);
        return new Float32Array(copy());
      },
      i64: () => Array.from(new BigInt64Array(copy()), Number),
      u8: () => new Uint8Array(bytes),
    };
  }
  return out;
}

/** max |ours - ref| / max |ref| */
export function relErr(ours: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (ours.length !== ref.length) throw new Error(`length ${ours.length} vs reference ${ref.length}`);
  let maxDiff = 0;
  let maxRef = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(ours[i]! - ref[i]!);
    if (!(d <= maxDiff)) maxDiff = Number.isNaN(d) ? Infinity : d;
    maxRef = Math.max(maxRef, Math.abs(ref[i]!));
  }
  return maxDiff / maxRef;
}

export function readJson<T = any>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}
