// DIR/manifest.jsonl: one JSON line per image of a --out-dir run, appended as each image is done
// (so an interrupted run still lists what it finished), then rewritten at the end of the run
// (atomically) to hold exactly one line per input, in input order, the latest for each:
//   {"input": path, "output": file | null, "status": "encoded" | "skipped" | "failed",
//    "tokens": n, "ms": {"decode", "preprocess", "encode"}, "error": {"code", "message"}}
// (skipped: its output was up to date; tokens come from its record.)
import { open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { ioError } from '../io/io-error.js';
import { writeFileAtomic } from '../io/atomic-file.js';

export const MANIFEST_NAME = 'manifest.jsonl';

export interface ManifestEntry {
  input: string;
  output: string | null;
  status: 'encoded' | 'skipped' | 'failed';
  tokens?: number;
  ms?: { decode: number; preprocess: number; encode: number };
  error?: { code: string; message: string };
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
    try {
      return new Manifest(path, await open(path, 'a'));
    } catch (e) {
      throw ioError(path, 'cannot write', e);
    }
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
    await this.#handle.close().catch(() => undefined);
    const latest = new Map<string, string>();
    for (const line of (await readFile(this.path, 'utf8').catch(() => '')).split('\n')) {
      if (!line.trim()) continue;
      try {
        const e = JSON.parse(line) as ManifestEntry;
        if (typeof e.input === 'string') latest.set(e.input, line);
      } catch {
        // a line cut by a crash: the image is redone or listed again
      }
    }
    const lines = order.flatMap((input) => (latest.has(input) ? [latest.get(input)!] : []));
    await writeFileAtomic(this.path, lines.length ? lines.join('\n') + '\n' : '');
  }

  async close(): Promise<void> {
    await this.#handle.close().catch(() => undefined);
  }
}
