// The one bulk job runner: for each input, read it (stamp it first), skip it when its outputs are
// up to date, encode the rest through tower.encodeMany (groups, block-major), write each image's
// outputs (output-dir.ts) and a manifest line, and report one outcome per input. `tessera encode`,
// the fleet's image jobs and its group jobs all run their images through runBulk, so they share one
// order of steps, one up-to-date check and one writer.
//
// Outcomes come in the order they are settled, each with its input's index: an image found up to
// date (or unreadable) is reported as soon as the feed reaches it, while the images before it may
// still be encoding. A failure is the image's own (its code and message, without encodeMany's
// "input N" prefix) and says when it happened: while reading the input, encoding it, or writing its
// outputs (the caller decides whether a write failure ends its run: ERR_INVALID_ARGUMENT is the
// image's own target, which can never be written — a name too long, a FIFO or link in its place —
// while ERR_IO is the system's refusal, a full disk or a read-only folder, which the next image meets
// too). An image whose outputs were found damaged on a rerun is encoded again, its outcome saying why.
import { mkdir } from 'node:fs/promises';
import { relative } from 'node:path';
import { TesseraError, toTesseraError } from '../errors.js';
import type { ImageInput } from '../image/decode.js';
import { ioError } from '../io/io-error.js';
import type { EncodeManyOptions, EncodeResult, VisionTower } from '../tower.js';
import type { BulkInput } from './inputs.js';
import { Manifest, type ManifestEntry } from './manifest.js';
import { checkOutputs, removeStaleTemporaries, stampInput, writeImageOutputs, type InputStamp, type OutputJob } from './output-dir.js';

/** An input made ready to encode: the image (a path or its bytes) and, when outputs are written, its stamp. */
export interface LoadedInput {
  image: ImageInput;
  /** Absent when the file could not be stat'ed: it is encoded anyway, so that its own error names it. */
  stamp?: InputStamp;
}

/** Reads (or fetches) an input; `stamp` says whether its stamp is needed (outputs are written), `hash` whether with its SHA-256. */
export type InputLoader = (input: BulkInput, how: { stamp: boolean; hash: boolean }) => Promise<LoadedInput>;

/** The default loader: the file at input.path, stamped before it is read. */
export const loadFile: InputLoader = async (input, how) => {
  if (!how.stamp) return { image: input.path };
  const stamp = await stampInput(input.path, how.hash).catch(() => undefined);
  return stamp ? { image: input.path, stamp } : { image: input.path };
};

export interface BulkRunOptions {
  /** Write each image's outputs here (--out-dir) and skip the images whose outputs are up to date. Without it, results are only reported. */
  outputs?: OutputJob;
  /** Redo images whose outputs are up to date. */
  force?: boolean;
  /** Append one line per image as it is settled (paths relative to outputs.dir). */
  manifest?: Manifest;
  /** How inputs are read (default loadFile); the fleet's loader fetches URLs. */
  load?: InputLoader;
  /** encodeMany's options: sizing, batch, signal, onProgress. */
  encode?: EncodeManyOptions;
}

interface Settled {
  /** The input's place in the run's inputs, and the input. */
  index: number;
  input: BulkInput;
  /** Time spent reading (stamping, fetching) the input and checking its outputs. */
  readMs: number;
}

export type BulkOutcome = Settled &
  (
    | { status: 'skipped'; output: string; files: string[]; tokens: number; width: number }
    /** output and files: written under outputs.dir (absent without outputs). */
    | { status: 'encoded'; result: EncodeResult; output?: string; files?: string[]; writeMs: number; redone?: string }
    | { status: 'failed'; error: TesseraError; during: 'read' | 'encode' | 'write' }
  );

/**
 * Prepares an output folder for a run: creates it, removes the temporary files killed runs left in
 * it (only where every writer to the folder runs on this machine: a process id names a process
 * here only), and opens its manifest.
 */
export async function openOutputDir(dir: string, opts: { removeStale: boolean }): Promise<{ manifest: Manifest; removed: number }> {
  try {
    await mkdir(dir, { recursive: true });
  } catch (e) {
    throw ioError(dir, 'cannot create folder', e);
  }
  const removed = opts.removeStale ? await removeStaleTemporaries(dir) : 0;
  return { manifest: await Manifest.open(dir), removed };
}

/** The manifest line of an outcome; paths in it are relative to the output folder. */
export function manifestEntry(o: BulkOutcome, dir: string | undefined): ManifestEntry {
  const name = (p: string | undefined) => (p === undefined ? null : dir === undefined ? p : relative(dir, p).split('\\').join('/'));
  switch (o.status) {
    case 'skipped':
      return { input: o.input.path, output: name(o.output), status: 'skipped', tokens: o.tokens };
    case 'encoded': {
      const t = o.result.timings;
      return { input: o.input.path, output: name(o.output), status: 'encoded', tokens: o.result.tokens, ms: { decode: t.decodeMs, preprocess: t.preprocessMs, encode: t.encodeMs } };
    }
    case 'failed':
      return { input: o.input.path, output: null, status: 'failed', error: { code: o.error.code, message: o.error.message } };
  }
}

interface Fed {
  index: number;
  input: BulkInput;
  readMs: number;
  stamp?: InputStamp;
  /** Its outputs were found damaged (why): they are redone. */
  redone?: string;
}

/** Runs `inputs` through `tower` (see the header); one outcome per input. Throws only what ends the whole run (ERR_ABORTED, ERR_CLOSED, a manifest that cannot be written). */
export async function* runBulk(
  tower: VisionTower,
  inputs: Iterable<BulkInput> | AsyncIterable<BulkInput>,
  opts: BulkRunOptions = {},
): AsyncGenerator<BulkOutcome, void, undefined> {
  const { outputs, manifest } = opts;
  const load = opts.load ?? loadFile;
  // Outcomes the feed settles without encoding (up to date, unreadable), waiting to be reported;
  // `wake` tells the loop below one has arrived while it waits for encodeMany.
  const settled: BulkOutcome[] = [];
  let wake: (() => void) | undefined;
  const settle = (o: BulkOutcome) => {
    settled.push(o);
    wake?.();
  };
  // The images handed to encodeMany, by the index it gives them (the order they were fed).
  const fed = new Map<number, Fed>();
  let count = 0;
  let fedCount = 0;

  async function* feed(): AsyncGenerator<ImageInput> {
    for await (const input of inputs) {
      const index = count++;
      const t0 = performance.now();
      let loaded: LoadedInput;
      try {
        loaded = await load(input, { stamp: outputs !== undefined, hash: outputs?.hashInputs ?? false });
      } catch (e) {
        settle({ index, input, readMs: performance.now() - t0, status: 'failed', error: toTesseraError(e), during: 'read' });
        continue;
      }
      const found = outputs && loaded.stamp && !opts.force ? await checkOutputs(outputs, input, loaded.stamp) : undefined;
      const readMs = performance.now() - t0;
      if (found?.state === 'up-to-date') {
        const u = found.output;
        settle({ index, input, readMs, status: 'skipped', output: u.primary, files: u.files, tokens: u.tokens, width: u.width });
        continue;
      }
      fed.set(fedCount++, { index, input, readMs, ...(loaded.stamp ? { stamp: loaded.stamp } : {}), ...(found?.state === 'damaged' ? { redone: found.why } : {}) });
      yield loaded.image;
    }
  }

  const finish = async (item: { index: number; result?: EncodeResult; error?: TesseraError }): Promise<BulkOutcome> => {
    const f = fed.get(item.index)!;
    fed.delete(item.index);
    const { index, input, readMs } = f;
    const redone = f.redone !== undefined ? { redone: f.redone } : {};
    if (item.error) {
      // encodeMany names the image by its place in the feed; the outcome names it by its input.
      const own = item.error.cause instanceof TesseraError ? item.error.cause : item.error;
      return { index, input, readMs, status: 'failed', error: own, during: 'encode' };
    }
    const result = item.result!;
    if (!outputs) return { index, input, readMs, status: 'encoded', result, writeMs: 0 };
    let stamp = f.stamp;
    if (!stamp) {
      // Not stat'able before the read, yet it decoded: stamped now (a failure is the input's).
      try {
        stamp = await stampInput(input.path, outputs.hashInputs);
      } catch (e) {
        return { index, input, readMs, status: 'failed', error: toTesseraError(e), during: 'read' };
      }
    }
    const w0 = performance.now();
    try {
      const written = await writeImageOutputs(outputs, input, result, stamp);
      return { index, input, readMs, status: 'encoded', result, output: written.primary, files: written.files, writeMs: performance.now() - w0, ...redone };
    } catch (e) {
      return { index, input, readMs, status: 'failed', error: toTesseraError(e, 'ERR_IO'), during: 'write' };
    }
  };

  const report = async (o: BulkOutcome): Promise<BulkOutcome> => {
    await manifest?.append(manifestEntry(o, outputs?.dir));
    return o;
  };

  const items = tower.encodeMany(feed(), opts.encode ?? {});
  try {
    let next = items.next();
    for (;;) {
      while (settled.length) yield await report(settled.shift()!);
      const woken = new Promise<'woken'>((resolve) => (wake = () => resolve('woken')));
      const got = await Promise.race([next, woken]);
      wake = undefined;
      if (got === 'woken') continue;
      if (got.done) break;
      const outcome = await finish(got.value);
      yield await report(outcome);
      next = items.next();
    }
    while (settled.length) yield await report(settled.shift()!);
  } finally {
    await items.return(undefined);
  }
}
