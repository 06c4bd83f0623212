// Shared by the family builders: turn an indexed tensor into a TensorSpec, checking that it is
// present, of the expected shape and of a dtype tessera reads.
import { ZodError } from 'zod';
import { TesseraError } from '../errors.js';
import type { TensorIndex } from '../formats/tensor-index.js';
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

/** A zod failure as ERR_CONFIG_INVALID naming the field and why. @internal */
export function configError(file: string, err: ZodError): TesseraError {
  const issue = err.issues[0]!;
  const field = issue.path.length ? issue.path.join('.') : '(root)';
  return new TesseraError('ERR_CONFIG_INVALID', `${file}: field '${field}': ${issue.message}`);
}
