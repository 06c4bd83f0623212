// The one way tessera writes a file (the CLI's --out, the --out-dir outputs, the manifest): a
// temporary file beside the target (same directory, so the rename cannot cross filesystems),
// written, fsync'ed, then renamed over the target, and the directory fsync'ed. Readers see the old
// file or the whole new one, never a half-written one. A target that exists and is not a regular
// file (a device, FIFO, directory, socket) or is a symbolic link is refused before anything is
// created (lstat: nothing is opened, so a FIFO cannot block): renaming over it would replace a
// device node with a file, and a link is not followed out of the folder it sits in. Temporary names
// are short and of fixed length (`.tessera-tmp-PPPPPPPP-RRRRRRRR`: the process id and 32 random bits
// in hex, 30 bytes), so a temporary name fits wherever the target's does. Every failure removes the
// temporary file and is a TesseraError: ERR_INVALID_ARGUMENT when the target can never be written
// (not a regular file, a link, a name over the filesystem's limit: ENAMETOOLONG), ERR_IO for the
// system's refusals (ENOSPC, EACCES, EROFS, ...), which may pass.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { TesseraError } from '../errors.js';
import { errnoOf, ioError } from '../io/io-error.js';

/** What a non-regular file is, for messages. */
export function fileKind(st: { isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean; isSymbolicLink(): boolean }): string {
  return st.isSymbolicLink() ? 'a symbolic link' : st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device';
}

/**
 * The error of a system call on `target` while writing it: a name the filesystem can never hold
 * (ENAMETOOLONG) is the target's own fault and permanent (ERR_INVALID_ARGUMENT); every other errno
 * is ioError's (ERR_IO).
 */
export function writeError(target: string, e: unknown, action = 'cannot write'): TesseraError {
  if (errnoOf(e) === 'ENAMETOOLONG')
    return new TesseraError('ERR_INVALID_ARGUMENT', `${action} ${target}: its name (${Buffer.byteLength(basename(target))} bytes) is longer than the filesystem allows`, { cause: e });
  return ioError(target, action, e);
}

/**
 * Refuses a target that exists and is not a regular file, or is a symbolic link (lstat: the link
 * is not followed, and nothing is opened, so a FIFO cannot block).
 */
export async function checkOutputTarget(target: string): Promise<void> {
  let st;
  try {
    st = await lstat(target);
  } catch (e) {
    if (errnoOf(e) === 'ENOENT') return;
    throw writeError(target, e);
  }
  if (!st.isFile())
    throw new TesseraError('ERR_INVALID_ARGUMENT', `output ${target} exists and is ${fileKind(st)}, not a regular file: refusing to replace it`);
}

/** A file beside `target` that nobody else names: `.tessera-TAG-PPPPPPPP-RRRRRRRR` (30 bytes for tmp). */
function siblingPath(target: string, tag: 'tmp' | 'data'): string {
  return join(dirname(target), `.tessera-${tag}-${process.pid.toString(16).padStart(8, '0')}-${randomBytes(4).toString('hex')}`);
}

/** The names of this module's temporary files: today's, and the longer ones of earlier versions (`.NAME.tessera-TAG-PID-RANDOM`). */
const SIBLING_NAME = /^\.tessera-(?:tmp|data)-([0-9a-f]{8})-[0-9a-f]{8}$/;
const OLD_SIBLING_NAME = /^\..+\.tessera-(?:tmp|data)-(\d+)-[0-9a-f]{8}$/;

/**
 * The process that made a temporary or scratch file of this module, from its name; undefined for
 * any other name. A file whose process is gone was left by a run that was killed.
 */
export function temporaryFileOwner(name: string): number | undefined {
  const m = SIBLING_NAME.exec(name);
  if (m) return parseInt(m[1]!, 16);
  const old = OLD_SIBLING_NAME.exec(name);
  return old ? Number(old[1]) : undefined;
}

/**
 * A scratch file beside `target` (created exclusively, mode 0600), for data that is staged before
 * the final file is written; remove() deletes it.
 */
export async function createScratchFile(target: string, tag: 'data'): Promise<{ path: string; handle: FileHandle; remove(): Promise<void> }> {
  const path = siblingPath(target, tag);
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  } catch (e) {
    throw writeError(target, e);
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
      throw writeError(target, e);
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
      throw writeError(this.target, e);
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
