// Shared by the family builders: turn an indexed tensor into a TensorSpec, checking that it is
// present, of the expected shape and of a dtype tessera reads.
import { ZodError } from 'zod';
import { TesseraError } from '../errors.js';
import { elementCount, storedBytes, type IndexedTensor, type TensorIndex } from '../formats/tensor-index.js';
import { DTYPES, type TensorSpec } from './types.js';

export function towerTensor(
  index: TensorIndex,
  name: string,
  role: string,
  shape: readonly number[],
): TensorSpec {
  const t = index.tensors.get(name);
  if (!t) throw new TesseraError('ERR_TENSOR_MISSING', `tower tensor '${name}' is missing from the weights`);
  const same = t.shape.length === shape.length && t.shape.every((d, i) => d === shape[i]);
  if (!same)
    throw new TesseraError(
      'ERR_TENSOR_SHAPE',
      `tensor '${name}' has shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`,
    );
  if (!t.dtype)
    throw new TesseraError('ERR_MODEL_FORMAT', `tensor '${name}' has type ${t.storedType}, which tessera does not read (${DTYPES.join(', ')})`);
  return { role, name, dtype: t.dtype, shape: [...shape], file: t.file, offset: t.offset, length: t.length };
}

/**
 * One tensor of the model assembled from several of the file's (`names`, each of shape `partShape`, one
 * dtype, one file): their elements taken `chunk` at a time in turn, part 0's first chunk, part 1's first
 * chunk, ..., then each part's second chunk, and so on. A whole part as the chunk stacks the parts' rows
 * (q | k | v); a smaller one interleaves them (the time steps of a Conv3d kernel split in two Conv2d ones).
 * The one statement of that rule: native io reads the byte ranges it lists, in order, as the tensor's
 * stored bytes (a Q8_0 chunk must be whole blocks, so the gathered bytes are Q8_0 rows too).
 */
export function assembledTensor(
  index: TensorIndex,
  names: readonly string[],
  role: string,
  partShape: readonly number[],
  shape: readonly number[],
  chunk: number,
): TensorSpec {
  const parts: IndexedTensor[] = names.map((n) => {
    const t = index.tensors.get(n);
    if (!t) throw new TesseraError('ERR_TENSOR_MISSING', `tower tensor '${n}' is missing from the weights`);
    return t;
  });
  parts.forEach((t) => towerTensor(index, t.name, role, partShape)); // shape and type, each named
  const [first] = parts;
  const name = names.join(' + ');
  const odd = parts.find((t) => t.dtype !== first!.dtype || t.file !== first!.file);
  if (odd)
    throw new TesseraError('ERR_MODEL_FORMAT', `tensors ${name}: '${odd.name}' is ${odd.storedType}, '${first!.name}' ${first!.storedType}; tessera joins them only when they share a type`);
  const dtype = first!.dtype!;
  const per = elementCount(partShape);
  const chunkBytes = storedBytes(dtype, chunk);
  if (per % chunk !== 0 || chunkBytes === undefined || elementCount(shape) !== per * parts.length)
    throw new TesseraError('ERR_TENSOR_SHAPE', `tensors ${name} (${first!.storedType} [${partShape.join(', ')}]) cannot be joined into [${shape.join(', ')}] by chunks of ${chunk}`);
  const pieces: { offset: number; length: number }[] = [];
  for (let c = 0; c < per / chunk; c++)
    for (const t of parts) {
      const offset = t.offset + c * chunkBytes, last = pieces.at(-1);
      if (last && last.offset + last.length === offset) last.length += chunkBytes;
      else pieces.push({ offset, length: chunkBytes });
    }
  const length = parts.reduce((a, t) => a + t.length, 0);
  return { role, name, dtype, shape: [...shape], file: first!.file, offset: pieces[0]!.offset, length, ...(pieces.length > 1 ? { pieces } : {}) };
}

/** A zod failure as ERR_CONFIG_INVALID naming the field and why. @internal */
export function configError(file: string, err: ZodError): TesseraError {
  const issue = err.issues[0]!;
  const field = issue.path.length ? issue.path.join('.') : '(root)';
  return new TesseraError('ERR_CONFIG_INVALID', `${file}: field '${field}': ${issue.message}`);
}
