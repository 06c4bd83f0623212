// Test helpers: read whole safetensors fixture files and measure agreement the way the project
// defines it (max |ours - ref| / max |ref| over a stage).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { maxRelErr } from '../../src/doctor.js';

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

/**
 * max |ours - ref| / max |ref|: the library's own measure (src/doctor.ts, what `tessera doctor`
 * reports), refusing outright a pair of different lengths (the library reports Infinity).
 */
export function relErr(ours: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (ours.length !== ref.length) throw new Error(`length ${ours.length} vs reference ${ref.length}`);
  return maxRelErr(ours, ref);
}

export function readJson<T = any>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** A Qwen fixture case's tower input: HF's pixel_values and grid. */
export function qwenInput(family: string, name: string): { pixelValues: Float32Array; grid: { t: number; h: number; w: number } } {
  const ref = readTensors(`${FIXTURES}${family}/expected/${name}.safetensors`);
  const [t, h, w] = ref['image_grid_thw']!.i64();
  return { pixelValues: ref['pixel_values']!.f32(), grid: { t: t!, h: h!, w: w! } };
}

/** A gemma4-tiny fixture case's tower input: unpadded pixel_values and (x, y) positions. */
export function gemmaInput(name: string): { pixelValues: Float32Array; positions: Int32Array } {
  const ref = readTensors(`${FIXTURES}gemma4-tiny/expected/${name}.safetensors`);
  return { pixelValues: ref['pixel_values']!.f32(), positions: Int32Array.from(ref['positions']!.i64()) };
}

/** A deterministic xorshift32 generator in [0, 1), so a fuzz failure reproduces from its seed. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}
