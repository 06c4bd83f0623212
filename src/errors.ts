// Every failure tessera reports is a TesseraError with a stable code (docs/design.md#errors) and a message
// naming what is at fault. Errors from the addon arrive as plain Errors carrying `.code` and are
// wrapped here; nothing else is allowed to escape the public API.
export const ERROR_CODES = [
  'ERR_MODEL_NOT_FOUND',
  'ERR_MODEL_FORMAT',
  'ERR_CONFIG_INVALID',
  'ERR_TENSOR_MISSING',
  'ERR_TENSOR_SHAPE',
  'ERR_WEIGHTS_CORRUPT',
  'ERR_IMAGE_DECODE',
  'ERR_IMAGE_TOO_LARGE',
  'ERR_IMAGE_ASPECT',
  'ERR_INVALID_ARGUMENT',
  'ERR_ABORTED',
  'ERR_CLOSED',
  'ERR_BACKEND_UNAVAILABLE',
  'ERR_OUT_OF_MEMORY',
  'ERR_GPU',
  'ERR_NUMERIC',
  'ERR_IO',
  'ERR_INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class TesseraError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TesseraError';
    this.code = code;
  }
}

/** Wraps anything thrown by the addon or a dependency; TesseraErrors pass through unchanged. */
export function toTesseraError(err: unknown, fallback: ErrorCode = 'ERR_INTERNAL'): TesseraError {
  if (err instanceof TesseraError) return err;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const known = typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code);
    return new TesseraError(known ? (code as ErrorCode) : fallback, err.message, { cause: err });
  }
  return new TesseraError(fallback, String(err));
}
