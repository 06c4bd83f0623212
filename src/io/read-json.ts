// A JSON object file (config.json, preprocessor_config.json, a shard index, a pack manifest): read
// through openRegular with a size bound, parsed, and required to be an object.
import { TesseraError, type ErrorCode } from '../errors.js';
import { isMissing, readRegular } from './open-regular.js';

/** Real configs and shard indexes are well under 1 MiB; a bound keeps a hostile one from filling memory. */
export const MAX_JSON_FILE_BYTES = 64 * 1024 * 1024;

/**
 * The object in `path`, or undefined when the file does not exist. A FIFO, device or directory in
 * its place, a file over MAX_JSON_FILE_BYTES, or text that is not a JSON object is `invalid`'s code.
 */
export async function readJsonFile(path: string, what: string, invalid: ErrorCode): Promise<Record<string, unknown> | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readRegular(path, {
      what,
      notFound: 'ERR_MODEL_NOT_FOUND',
      notRegular: invalid,
      maxBytes: MAX_JSON_FILE_BYTES,
      tooLarge: (size) => new TesseraError(invalid, `${path}: ${what} is ${size} bytes, over the ${MAX_JSON_FILE_BYTES}-byte limit`),
    });
  } catch (e) {
    if (e instanceof TesseraError && isMissing(e.cause)) return undefined;
    throw e;
  }
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (e) {
    throw new TesseraError(invalid, `${path}: ${what} is not valid JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new TesseraError(invalid, `${path}: ${what} must be a JSON object`);
  return json as Record<string, unknown>;
}
