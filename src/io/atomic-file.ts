// The one way tessera writes a file (the CLI's --out, the --out-dir outputs, the manifest): a
// temporary file beside the target (same directory, so the rename cannot cross filesystems),
// written, fsync'ed, then renamed over the target, and the directory fsync'ed. Readers see the old
// file or the whole new one, never a half-written one. A target that exists and is not a regular
// file (a device, FIFO, directory, socket) is refused before anything is created: renaming over it
// would replace a device node with a file. Every failure removes the temporary file and is a
// TesseraError (ERR_IO for the system's refusals: ENOSPC, EACCES, EROFS, ...).
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { TesseraError } from '../errors.js';
import { errnoOf, ioError } from '../io/io-error.js';

/** Refuses a target that exists and is not a regular file (symlinks are followed). */
export async function checkOutputTarget(target: string): Promise<void> {
  let st;
  try {
    st = await stat(target);
  } catch (e) {
    if (errnoOf(e) === 'ENOENT') return;
    throw ioError(target, 'cannot write', e);
  }
  if (!st.isFile()) {
    const kind = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device';
    throw new TesseraError('ERR_INVALID_ARGUMENT', `output ${target} exists and is ${kind}, not a regular file: refusing to replace it`);
  }
}

/** A file beside `target` that nobody else names: `.NAME.tessera-TAG-PID-RANDOM`. */
function siblingPath(target: string, tag: string): string {
  return join(dirname(target), `.${basename(target)}.tessera-${tag}-${process.pid}-${randomBytes(4).toString('hex')}`);
}

const SIBLING_NAME = /^\..+\.tessera-(?:tmp|data)-(\d+)-[0-9a-f]{8}$/;

/**
 * The process that made a temporary or scratch file of this module, from its name; undefined for
 * any other name. A file whose process is gone was left by a run that was killed.
 */
export function temporaryFileOwner(name: string): number | undefined {
  const m = SIBLING_NAME.exec(name);
  return m ? Number(m[1]) : undefined;
}

/**
 * A scratch file beside `target` (created exclusively, mode 0600), for data that is staged before
 * the final file is written; remove() deletes it.
 */
export async function createScratchFile(target: string, tag: string): Promise<{ path: string; handle: FileHandle; remove(): Promise<void> }> {
  const path = siblingPath(target, tag);
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  } catch (e) {
    throw ioError(target, 'cannot write', e);
  }
  return {
    path,
    handle,
    remove: async () => {
      await handle.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
    },
  };
}

/** An output file being written: write() appends, commit() puts it in place, abort() discards it. */
export class AtomicFile {
  readonly target: string;
  readonly tempPath: string;
  #handle: FileHandle | undefined;

  private constructor(target: string, tempPath: string, handle: FileHandle) {
    this.target = target;
    this.tempPath = tempPath;
    this.#handle = handle;
  }

  /** Checks the target, then creates the temporary file beside it. */
  static async create(target: string): Promise<AtomicFile> {
    await checkOutputTarget(target);
    const tempPath = siblingPath(target, 'tmp');
    try {
      // 0666 less the umask: the mode a plain write would have given the target.
      const handle = await open(tempPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o666);
      return new AtomicFile(target, tempPath, handle);
    } catch (e) {
      throw ioError(target, 'cannot write', e);
    }
  }

  /** The open temporary file, for callers that stream into it (pipe, positioned writes). */
  get handle(): FileHandle {
    if (!this.#handle) throw new TesseraError('ERR_INTERNAL', `${this.target}: written after commit or abort`);
    return this.#handle;
  }

  async write(data: Uint8Array | string): Promise<void> {
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      let done = 0;
      while (done < bytes.byteLength) done += (await this.handle.write(bytes, done, bytes.byteLength - done)).bytesWritten;
    } catch (e) {
      await this.abort();
      throw ioError(this.target, 'cannot write', e);
    }
  }

  /** fsync, close, check the target again, rename over it, fsync the directory. */
  async commit(): Promise<void> {
    const handle = this.handle;
    try {
      await handle.sync();
      await handle.close();
      this.#handle = undefined;
      await checkOutputTarget(this.target); // something may have appeared there meanwhile
      await rename(this.tempPath, this.target);
    } catch (e) {
      await this.abort();
      throw ioError(this.target, 'cannot write', e);
    }
    await syncDirectory(dirname(this.target));
  }

  /** Closes and removes the temporary file; safe to call more than once. */
  async abort(): Promise<void> {
    await this.#handle?.close().catch(() => undefined);
    this.#handle = undefined;
    await unlink(this.tempPath).catch(() => undefined);
  }
}

// Makes the rename durable. Some filesystems refuse fsync on a directory (EINVAL, EISDIR): the
// rename itself has happened, so that is not a failure of the write.
async function syncDirectory(dir: string): Promise<void> {
  const fh = await open(dir, constants.O_RDONLY).catch(() => undefined);
  if (!fh) return;
  await fh.sync().catch(() => undefined);
  await fh.close().catch(() => undefined);
}

/**
 * Writes `target` atomically: `content` is the bytes, or a callback that writes them through the
 * AtomicFile (for output produced piecewise). Any failure leaves the target as it was.
 */
export async function writeFileAtomic(target: string, content: Uint8Array | string | ((file: AtomicFile) => Promise<void>)): Promise<void> {
  const file = await AtomicFile.create(target);
  try {
    if (typeof content === 'function') await content(file);
    else await file.write(content);
  } catch (e) {
    await file.abort();
    throw ioError(target, 'cannot write', e);
  }
  await file.commit();
}
