// DIR/manifest.jsonl: one JSON line per image of a --out-dir run, appended as each image is done
// (so an interrupted run still lists what it finished), then rewritten at the end of the run
// (atomically) to hold exactly one line per input, in input order, the latest for each:
//   {"input": path, "output": file | null, "status": "encoded" | "skipped" | "failed",
//    "tokens": n, "ms": {"decode", "preprocess", "encode"}, "error": {"code", "message"}}
// (skipped: its output was up to date; tokens come from its record.)
// The file is opened without following a link and without blocking (O_NOFOLLOW | O_NONBLOCK), and
// used only when fstat says it is a regular file: a symbolic link (which would write outside the
// folder), a FIFO (which would block), a device or a directory there is refused, ending the run
// before any image (ERR_INVALID_ARGUMENT). An old manifest whose last line lacks its newline (a run
// killed mid-line) gets one before this run appends. Compaction reads the old file in chunks, line by
// line (whatever its size; a line over MAX_LINE_BYTES is not a manifest line and is dropped), keeping
// only the latest line of each of this run's inputs, so no size makes it lose this run's lines.
import { constants } from 'node:fs';
import { lstat, open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { TesseraError } from '../errors.js';
import { errnoOf, ioError } from '../io/io-error.js';
import { AtomicFile, fileKind } from '../io/atomic-file.js';

export const MANIFEST_NAME = 'manifest.jsonl';

export interface ManifestEntry {
  input: string;
  output: string | null;
  status: 'encoded' | 'skipped' | 'failed';
  tokens?: number;
  ms?: { decode: number; preprocess: number; encode: number };
  error?: { code: string; message: string };
}

/** A manifest line is a few hundred bytes (an error message at most a few KiB); longer "lines" are not ours. */
const MAX_LINE_BYTES = 1 << 20;

/** The lines of an open file, read in chunks from its start; lines over MAX_LINE_BYTES are skipped. */
async function* linesOf(handle: FileHandle): AsyncGenerator<string> {
  const buf = Buffer.allocUnsafe(1 << 20);
  let pos = 0;
  let partial: Buffer[] = [];
  let partialBytes = 0;
  let overlong = false;
  for (;;) {
    const { bytesRead } = await handle.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) break;
    pos += bytesRead;
    let start = 0;
    for (let nl = buf.indexOf(10, start); nl !== -1 && nl < bytesRead; nl = buf.indexOf(10, start)) {
      if (!overlong && partialBytes + nl - start <= MAX_LINE_BYTES) yield Buffer.concat([...partial, buf.subarray(start, nl)]).toString('utf8');
      partial = [];
      partialBytes = 0;
      overlong = false;
      start = nl + 1;
    }
    if (start < bytesRead && !overlong) {
      partialBytes += bytesRead - start;
      if (partialBytes > MAX_LINE_BYTES) {
        overlong = true;
        partial = [];
      } else partial.push(Buffer.from(buf.subarray(start, bytesRead)));
    }
  }
  if (partial.length && !overlong) yield Buffer.concat(partial).toString('utf8');
}

export class Manifest {
  readonly path: string;
  #handle: FileHandle;

  private constructor(path: string, handle: FileHandle) {
    this.path = path;
    this.#handle = handle;
  }

  static async open(dir: string): Promise<Manifest> {
    const path = join(dir, MANIFEST_NAME);
    const refuse = (kind: string) => new TesseraError('ERR_INVALID_ARGUMENT', `${path} is ${kind}, not a regular file: refusing to write the manifest through it`);
    const st = await lstat(path).catch((e: unknown) => (errnoOf(e) === 'ENOENT' ? undefined : Promise.reject(ioError(path, 'cannot write', e))));
    if (st && !st.isFile()) throw refuse(fileKind(st));
    let handle: FileHandle;
    try {
      // Read-write (for the last byte below); O_RDWR opens a FIFO without blocking, and fstat refuses it.
      handle = await open(path, constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o666);
    } catch (e) {
      if (errnoOf(e) === 'ELOOP') throw refuse('a symbolic link');
      throw ioError(path, 'cannot write', e);
    }
    try {
      const now = await handle.stat();
      if (!now.isFile()) throw refuse(fileKind(now));
      if (now.size > 0) {
        const last = Buffer.alloc(1);
        await handle.read(last, 0, 1, now.size - 1);
        if (last[0] !== 10) await handle.write('\n');
      }
    } catch (e) {
      await handle.close().catch(() => undefined);
      throw ioError(path, 'cannot write', e);
    }
    return new Manifest(path, handle);
  }

  async append(entry: ManifestEntry): Promise<void> {
    try {
      await this.#handle.write(JSON.stringify(entry) + '\n');
    } catch (e) {
      throw ioError(this.path, 'cannot write', e);
    }
  }

  /** Closes the appender and rewrites the file: one line per input in `order`, the latest of each. */
  async compact(order: readonly string[]): Promise<void> {
    const wanted = new Set(order);
    const latest = new Map<string, string>();
    try {
      // Read through the handle this run appended with: the file it names, never a link put there since.
      for await (const line of linesOf(this.#handle)) {
        if (!line.trim()) continue;
        try {
          const e = JSON.parse(line) as ManifestEntry;
          if (typeof e.input === 'string' && wanted.has(e.input)) latest.set(e.input, line);
        } catch {
          // a line cut by a crash: the image is redone or listed again
        }
      }
    } catch (e) {
      throw ioError(this.path, 'cannot read back', e);
    } finally {
      await this.#handle.close().catch(() => undefined);
    }
    const file = await AtomicFile.create(this.path);
    try {
      // Written in chunks of about 1 MiB, not a call per line (millions of inputs).
      let chunk: string[] = [];
      let chunkBytes = 0;
      for (const input of order) {
        const line = latest.get(input);
        if (line === undefined) continue;
        chunk.push(line + '\n');
        chunkBytes += line.length + 1;
        if (chunkBytes >= 1 << 20) {
          await file.write(chunk.join(''));
          chunk = [];
          chunkBytes = 0;
        }
      }
      if (chunk.length) await file.write(chunk.join(''));
    } catch (e) {
      await file.abort();
      throw e;
    }
    await file.commit();
  }

  async close(): Promise<void> {
    await this.#handle.close().catch(() => undefined);
  }
}
