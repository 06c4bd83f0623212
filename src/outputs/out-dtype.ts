// --out-dtype f32|bf16|f16 (library: outputDtype): the dtype the float tensors of an output are
// written in. Narrowing is the addon's f32 -> bf16 / f16 conversion (native/common/dtype.h, the one
// place it is written): round to nearest, ties to even, as torch's `.to()` rounds; overflow goes
// to inf, subnormals are kept (f16) or flushed by rounding like any other value (bf16 shares f32's
// exponent), and a NaN stays a quiet NaN of the same sign. The engines cast embeddings to the
// model's dtype anyway (bf16 for every Qwen checkpoint), so a bf16 output loses nothing they keep.
import { TesseraError } from '../errors.js';
import { addon } from '../native.js';
import { OUTPUT_DTYPES, type OutputDtype } from '../options.js';
import type { OutputTensor } from './tensors.js';

export { OUTPUT_DTYPES, type OutputDtype };

/** The safetensors / OutputTensor dtype of each output dtype. */
export const OUTPUT_TENSOR_DTYPE: Record<OutputDtype, 'F32' | 'BF16' | 'F16'> = { f32: 'F32', bf16: 'BF16', f16: 'F16' };

/** f32 values as `dtype`'s bits (Uint16Array), or the values themselves for f32. */
export function narrowF32(data: Float32Array, dtype: OutputDtype): Float32Array | Uint16Array {
  if (dtype === 'f32') return data;
  if (!(OUTPUT_DTYPES as readonly string[]).includes(dtype)) throw new TesseraError('ERR_INVALID_ARGUMENT', `output dtype must be one of ${OUTPUT_DTYPES.join(', ')} (got '${String(dtype)}')`);
  const bytes = addon().convertDtype(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), 'f32', dtype);
  return new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
}

/** f32 values rounded to `dtype` and widened back (exactly): what a text format (SGLang's JSON) writes. */
export function roundedF32(data: Float32Array, dtype: OutputDtype): Float32Array {
  if (dtype === 'f32') return data;
  const narrow = narrowF32(data, dtype) as Uint16Array;
  const wide = addon().convertDtype(new Uint8Array(narrow.buffer, narrow.byteOffset, narrow.byteLength), dtype, 'f32');
  return new Float32Array(wide.buffer, wide.byteOffset, wide.byteLength / 4);
}

/** The tensor in `dtype` when it is a float one (F32); integer tensors (grids, positions) as they are. */
export function narrowTensor(t: OutputTensor, dtype: OutputDtype): OutputTensor {
  if (t.dtype !== 'F32' || dtype === 'f32') return t;
  return { name: t.name, dtype: OUTPUT_TENSOR_DTYPE[dtype], shape: t.shape, data: narrowF32(t.data as Float32Array, dtype) };
}
