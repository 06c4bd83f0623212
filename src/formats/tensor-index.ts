// A weights file's table of contents, whatever its format: name → dtype, shape and the absolute
// byte range of the data. safetensors.ts and gguf.ts produce it; the spec builders consume it.
import type { DType } from '../spec/types.js';

export interface IndexedTensor {
  name: string;
  /** The stored type as the file names it ("BF16", "F32", "Q8_0", ...). */
  storedType: string;
  /** Our dtype, or undefined when the stored type is one tessera cannot compute with. */
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

export const DTYPE_BYTES: Record<DType, number> = { f32: 4, f16: 2, bf16: 2 };

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}
