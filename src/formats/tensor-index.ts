// A weights file's table of contents, whatever its format: name → dtype, shape and the absolute
// byte range of the data. safetensors.ts and gguf.ts produce it; the spec builders consume it.
import type { DType } from '../spec/types.js';

export interface IndexedTensor {
  name: string;
  /** The stored type as the file names it ("BF16", "F32", "Q8_0", ...). */
  storedType: string;
  /** Our dtype, or undefined when the stored type is one tessera does not read. */
  dtype: DType | undefined;
  shape: number[];
  /** Index into TensorIndex.files. */
  file: number;
  offset: number;
  length: number;
}

export interface TensorIndex {
  files: string[];
  tensors: Map<string, IndexedTensor>;
}

/** How each dtype is stored: elements per block and bytes per block (q8_0: an f16 scale and 32 int8). */
export const DTYPE_STORAGE: Record<DType, { block: number; bytes: number }> = {
  f32: { block: 1, bytes: 4 },
  f16: { block: 1, bytes: 2 },
  bf16: { block: 1, bytes: 2 },
  q8_0: { block: 32, bytes: 34 },
};

/** Bytes of `elements` values stored as `dtype`; undefined when they are not a whole number of its blocks. */
export function storedBytes(dtype: DType, elements: number): number | undefined {
  const s = DTYPE_STORAGE[dtype];
  return elements % s.block === 0 ? (elements / s.block) * s.bytes : undefined;
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}
