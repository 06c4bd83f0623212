// Every file tessera reads (images, weights, shards, configs) is opened here: non-blocking, so a
// FIFO cannot hang the open, then fstat'ed on the open descriptor (no race with a rename), and
// refused unless it is a regular file: a FIFO, device (/dev/zero), socket or directory would block
// or never end. Reads are bounded by the size the caller allows, never by what the file yields.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { TesseraError, type ErrorCode } from '../errors.js';
import { ioError } from './io-error.js';

export interface RegularFile {
  handle: FileHandle;
  size: number;
}

export interface OpenRegularOptions {
  /** Names the file in messages ("image file", "weights file"). */
  what: string;
  /** The code a missing file gets (ERR_MODEL_NOT_FOUND, ERR_IMAGE_DECODE, ...). */
  notFound: ErrorCode;
  /** The code a FIFO, device, socket or directory gets. */
  notRegular: ErrorCode;
}

function kindOf(st: { isDirectory(): boolean; isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/** Opens `path` for reading if it is a regular file; the caller closes the handle. */
export async function openRegular(path: string, opts: OpenRegularOptions): Promise<RegularFile> {
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    // EISDIR (a directory opened for writing) never happens read-only; ENXIO is a socket.
    if ((e as NodeJS.ErrnoException).code === 'ENXIO')
      throw new TesseraError(opts.notRegular, `${opts.what} ${path} is a socket or device without a reader, not a regular file`, { cause: e });
    throw ioError(path, `cannot open ${opts.what}`, e, opts.notFound);
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new TesseraError(opts.notRegular, `${opts.what} ${path} is ${kindOf(st)}, not a regular file`);
    return { handle, size: st.size };
  } catch (e) {
    await handle.close().catch(() => undefined);
    throw ioError(path, `cannot stat ${opts.what}`, e, opts.notFound);
  }
}

/** The error is the path's absence (ENOENT, or a non-directory on the way). */
export function isMissing(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * The whole of a regular file, refused (with `tooLarge`'s code and message) when it is larger than
 * `maxBytes`: the read never goes past the size fstat gave, so a file growing under us is cut there.
 */
export async function readRegular(
  path: string,
  opts: OpenRegularOptions & { maxBytes: number; tooLarge: (size: number) => TesseraError },
): Promise<Buffer> {
  const { handle, size } = await openRegular(path, opts);
  try {
    if (size > opts.maxBytes) throw opts.tooLarge(size);
    const buf = Buffer.allocUnsafe(size);
    let done = 0;
    while (done < size) {
      const { bytesRead } = await handle.read(buf, done, size - done, done);
      if (bytesRead === 0) break; // shrank under us: what was read is what there is
      done += bytesRead;
    }
    return done === size ? buf : buf.subarray(0, done);
  } catch (e) {
    throw ioError(path, `cannot read ${opts.what}`, e, opts.notFound);
  } finally {
    await handle.close().catch(() => undefined);
  }
}
