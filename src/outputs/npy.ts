// NumPy's .npy format, version 1.0 (numpy.lib.format): the 6-byte magic "\x93NUMPY", version 1 0,
// a little-endian uint16 header length, then a Python dict literal (descr, fortran_order, shape)
// padded with spaces and ended by '\n' so that the data starts on a 64-byte boundary, then the
// data in C order. vLLM's image-embedding loader recognises base64 .npy bytes by that magic.
import type { OutputTensor } from './tensors.js';

const MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 0x01, 0x00]);
const ALIGN = 64;

import { TesseraError } from '../errors.js';

/** numpy's dtype string for each tensor dtype tessera writes (little-endian); numpy has no bfloat16. */
const DESCR: Record<OutputTensor['dtype'], string | undefined> = { F32: '<f4', F16: '<f2', BF16: undefined, I64: '<i8' };

/** The whole .npy file for one tensor. */
export function npyBytes(t: OutputTensor): Buffer {
  const shape = t.shape.length === 1 ? `(${t.shape[0]},)` : `(${t.shape.join(', ')})`;
  const descr = DESCR[t.dtype];
  if (!descr) throw new TesseraError('ERR_INVALID_ARGUMENT', `.npy: numpy has no dtype for ${t.dtype} (tensor ${t.name})`);
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const unpadded = MAGIC.length + 2 + header.length + 1;
  header += ' '.repeat((ALIGN - (unpadded % ALIGN)) % ALIGN) + '\n';
  const len = Buffer.alloc(2);
  len.writeUInt16LE(header.length);
  const data = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  return Buffer.concat([MAGIC, len, Buffer.from(header, 'latin1'), data]);
}
