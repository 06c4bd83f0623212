// How a failed system call becomes a TesseraError: a missing file keeps the caller's "not found"
// code, every other errno (EACCES, ENOSPC, EIO, EISDIR, ...) is ERR_IO naming the path and the action.
import { TesseraError, type ErrorCode } from '../errors.js';

export function errnoOf(err: unknown): string | undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * `action` says what was being done ("cannot read image file", "cannot write"); `notFound` is the
 * code a missing path gets (ERR_MODEL_NOT_FOUND for weights, ERR_IMAGE_DECODE for images).
 */
export function ioError(path: string, action: string, err: unknown, notFound: ErrorCode = 'ERR_IO'): TesseraError {
  if (err instanceof TesseraError) return err;
  const errno = errnoOf(err);
  const why = errno ?? (err instanceof Error ? err.message : String(err));
  const code: ErrorCode = errno === 'ENOENT' || errno === 'ENOTDIR' ? notFound : 'ERR_IO';
  return new TesseraError(code, `${action} ${path}: ${why}`, { cause: err });
}
