// VisionTower: the public API (docs/design.md#public-surface). It validates options, resolves the backend and the
// residency, hands the TowerSpec to the addon and queues encodes (one at a time per tower; the
// work itself runs off the JS thread in the addon).
import { freemem, totalmem } from 'node:os';
import { backendCandidates, openFirstAvailable } from './backend-choice.js';
import { TesseraError, toTesseraError } from './errors.js';
import { addon, type NativeEncodeResult, type NativeTower } from './native.js';
import { normaliseGrid } from './families/qwen-common.js';
import { familyOf } from './families/registry.js';
import { loadModel } from './load-model.js';
import { loadPacked } from './pack/load.js';
import { headerSize, makePreprocessor, type Plan, type Prepared, type Preprocessor } from './prepare.js';
import {
  MAX_INT32,
  OpenOptionsSchema,
  DEFAULT_BATCH,
  encodeManyOptionsSchema,
  encodeOptionsSchema,
  parseArgument,
  parseModelPath,
  pixelInputSchema,
  preprocessOptionsSchema,
  type EncodeManyOptions,
  type EncodeOptions,
  type GemmaPixelInput,
  type Grid,
  type GridTriple,
  type OpenOptions,
  type PixelInput,
  type PreprocessOptions,
  type Progress,
  type QwenPixelInput,
} from './options.js';
import type { ImageInput } from './image/index.js';
import { activationBudget, chooseResidency, heldWeightBytes, splitBatch, type WeightMemory } from './residency/index.js';
import { concatPrepared, splitResult, stageRecords, type StageShape } from './batch.js';
import type { TowerSpec } from './spec/types.js';
import { describe, peakRss, type MemoryInfo, type TowerInfo } from './tower-info.js';

export type {
  EncodeManyOptions,
  EncodeOptions,
  GemmaPixelInput,
  Grid,
  GridTriple,
  OpenOptions,
  PixelInput,
  PreprocessOptions,
  Progress,
  QwenPixelInput,
  StageShape,
};

export interface EncodeResult {
  embeddings: Float32Array;
  tokens: number;
  width: number;
  grid?: Grid[];
  positions?: Int32Array;
  deepstack?: Float32Array[];
  stages?: Record<string, Float32Array>;
  /** With `stages`: each stage's [rows, cols] and whether it has a row per patch or per token. */
  stageShapes?: Record<string, StageShape>;
  /** encode / encodeBatch: the image's upright decoded size and the size it was resized to. */
  decoded?: { width: number; height: number };
  resized?: { width: number; height: number };
  /**
   * decodeMs and preprocessMs are this image's own. encodeMs is this image's share of its group's
   * encode (the group passes every stage together): the group's wall time times this image's
   * patch rows over the group's; groupEncodeMs and groupImages are the group's own.
   */
  timings: { decodeMs: number; preprocessMs: number; encodeMs: number; groupEncodeMs?: number; groupImages?: number };
}

/** What encodeMany yields for each input: its result, or its TesseraError, with the input it belongs to. */
export type EncodeManyItem =
  | { index: number; input: ImageInput; result: EncodeResult; error?: undefined }
  | { index: number; input: ImageInput; result?: undefined; error: TesseraError };

/** What tower.estimate() predicts for one image, before any work (same formulas as the allocator). */
export interface Estimate extends Plan {
  /** Activations the addon allocates for this image (its scratch plan). */
  scratchBytes: number;
  /** Weights this tower holds under its residency. */
  weightBytes: number;
  /** The tower's input and output for this image. */
  ioBytes: number;
  /** weightBytes + scratchBytes + ioBytes: what encoding this image alone adds up to. */
  peakBytes: number;
}

function isSize(input: unknown): input is { width: number; height: number } {
  return typeof input === 'object' && input !== null && !(input instanceof Uint8Array) && 'width' in input;
}

function checkSize(size: { width: number; height: number }): { width: number; height: number } {
  const ok = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
  if (!ok(size.width) || !ok(size.height))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `estimate: width and height must be positive integers, not ${String(size.width)}x${String(size.height)}`);
  return { width: size.width, height: size.height };
}

/** The error of an aborted encode: ERR_ABORTED, keeping the signal's reason (AbortSignal.timeout's TimeoutError, the caller's own) as its cause. */
function abortedError(signal: AbortSignal, message: string): TesseraError {
  return new TesseraError('ERR_ABORTED', message, { cause: signal.reason });
}

/**
 * The cause of an ERR_OUT_OF_MEMORY refusal made before any work because the image's predicted
 * peak is more than the machine's whole memory: unlike a failed allocation, no retry on this
 * machine can help (the fleet fails such a job once: src/fleet/failure-class.ts).
 */
export class ExceedsMachineMemory extends Error {
  constructor(
    readonly peakBytes: number,
    readonly totalBytes: number,
  ) {
    super(`about ${peakBytes} bytes needed, ${totalBytes} bytes of memory in all`);
    this.name = 'ExceedsMachineMemory';
  }
}

export class VisionTower {
  readonly info: TowerInfo;
  readonly spec: TowerSpec;
  readonly preprocessorConfig: Record<string, unknown> | undefined;
  #native: NativeTower | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  #closing: Promise<void> | undefined;
  #preprocessor: Preprocessor | undefined;
  #memoryBudget: number | undefined;

  private constructor(
    native: NativeTower,
    spec: TowerSpec,
    info: TowerInfo,
    pre: Record<string, unknown> | undefined,
    memoryBudget: number | undefined,
  ) {
    this.#native = native;
    this.spec = spec;
    this.info = info;
    this.preprocessorConfig = pre;
    this.#memoryBudget = memoryBudget;
  }

  static async open(path: string, options: OpenOptions = {}): Promise<VisionTower> {
    parseModelPath(path);
    const o = parseArgument(OpenOptionsSchema, options, 'VisionTower.open');
    const candidates = backendCandidates(o.backend);
    const model = await loadModel(path, { verify: o.verify });
    const lib = addon();
    let weights: WeightMemory;
    try {
      weights = lib.weightMemory(model.spec, o.slots);
    } catch (e) {
      throw toTesseraError(e);
    }
    const decision = chooseResidency({
      requested: o.residency,
      env: process.env['TESSERA_RESIDENCY'],
      weights,
      memoryBudget: o.memoryBudget,
      freeMem: freemem(),
      totalMem: totalmem(),
    });
    const residency = decision.residency;
    const { value: native, backend } = await openFirstAvailable(candidates, async (b) => {
      try {
        return await lib.openTower(model.spec, { backend: b, residency, threads: o.threads, slots: o.slots, precision: o.precision });
      } catch (e) {
        throw toTesseraError(e);
      }
    });
    const memory: MemoryInfo = {
      residency,
      reason: decision.reason,
      slots: residency === 'stream' ? o.slots : 0,
      weightBytes: heldWeightBytes(residency, weights),
      residentBytes: weights.resident,
      slotBytes: weights.slot,
      streamBytes: weights.stream,
      mappedBytes: weights.mapped,
      fileBytes: weights.fileBytes,
      peakRss: peakRss(),
    };
    const info = describe(model.spec, path, backend, memory, lib.simdLevel, native.stats().precision);
    const tower = new VisionTower(native, model.spec, info, model.preprocessorConfig, o.memoryBudget);
    // A preprocessor config that is there is checked now (its bounds, its patch geometry against
    // the tower's), so a bad one fails open, not every later encode. A tower without one whose family's
    // processor needs one (Qwen) can still encodePixels; its image calls say what is missing.
    if (model.preprocessorConfig !== undefined || familyOf(model.spec.family).images.defaultsSuffice) {
      try {
        void tower.#pre;
      } catch (e) {
        await tower.close();
        throw e;
      }
    }
    return tower;
  }

  /** Runs fn after every earlier call on this tower; calls after close() reject with ERR_CLOSED. */
  #enqueue<T>(fn: (native: NativeTower) => Promise<T>): Promise<T> {
    if (this.#closing || !this.#native) return Promise.reject(new TesseraError('ERR_CLOSED', 'the tower is closed'));
    const native = this.#native;
    const run = this.#queue.then(() => fn(native));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Encodes HF-processor output: { pixelValues, grid } (Qwen) or { pixelValues, positions } (Gemma).
   * The arguments are checked and pixelValues and positions are copied at the call, so the caller
   * may reuse its buffers as soon as this returns.
   */
  encodePixels(input: PixelInput, options: EncodeOptions = {}): Promise<EncodeResult> {
    let args: Parameters<NativeTower['encode']>[0];
    let grids: Grid[] | undefined;
    let positions: Int32Array | undefined;
    let images: number;
    let opts: EncodeOptions;
    try {
      this.#checkOpen();
      const parsed = parseArgument(pixelInputSchema(this.spec.family), input, 'encodePixels input');
      familyOf(this.spec.family).pixelInput.check?.(parsed, this.spec.dims);
      opts = parseArgument(encodeOptionsSchema(this.spec.family), options, 'encodePixels options');
      const cols = this.#checkOpen().patchWidth;
      const pixels = parsed.pixelValues;
      if (pixels.length === 0 || pixels.length % cols !== 0)
        throw new TesseraError('ERR_INVALID_ARGUMENT', `encodePixels: pixelValues has ${pixels.length} values, not a whole number of ${cols}-value patch rows`);
      const rows = pixels.length / cols;
      if ('grid' in parsed) {
        grids = normaliseGrid(parsed.grid);
        const gridRows = grids.reduce((a, g) => a + g.t * g.h * g.w, 0);
        if (gridRows !== rows)
          throw new TesseraError('ERR_INVALID_ARGUMENT', `encodePixels: grid covers ${gridRows} patch rows, pixelValues holds ${rows}`);
        images = grids.length;
      } else {
        if (parsed.positions.length !== 2 * rows)
          throw new TesseraError('ERR_INVALID_ARGUMENT', `encodePixels: positions holds ${parsed.positions.length / 2} (x, y) pairs, pixelValues holds ${rows} patch rows`);
        const imageRows = parsed.imageRows;
        if (imageRows && imageRows.reduce((a, b) => a + b, 0) !== rows)
          throw new TesseraError('ERR_INVALID_ARGUMENT', `encodePixels: imageRows add up to ${imageRows.reduce((a, b) => a + b, 0)}, pixelValues holds ${rows} patch rows`);
        positions = parsed.positions.slice();
        images = imageRows?.length ?? 1;
        args = { pixels: pixels.slice(), cols, positions, ...(imageRows ? { imageRows: [...imageRows] } : {}) };
      }
      if (grids) args = { pixels: pixels.slice(), cols, grids: Int32Array.from(grids.flatMap((g) => [g.t, g.h, g.w])) };
    } catch (e) {
      return Promise.reject(toTesseraError(e));
    }
    return this.#enqueue(async (native) => {
      const started = performance.now();
      const raw = await this.#run(native, opts, images, args);
      const result: EncodeResult = {
        embeddings: raw.embeddings,
        tokens: raw.tokens,
        width: raw.width,
        timings: { decodeMs: 0, preprocessMs: 0, encodeMs: performance.now() - started },
      };
      if (grids) result.grid = grids;
      if (positions) result.positions = positions;
      if (raw.deepstack.length) result.deepstack = raw.deepstack;
      if (opts.stages) Object.assign(result, stageRecords(raw.stages));
      return result;
    });
  }

  async #run(
    native: NativeTower,
    options: EncodeOptions,
    images: number,
    args: Parameters<NativeTower['encode']>[0],
  ): Promise<NativeEncodeResult> {
    const { signal, onProgress } = options;
    if (signal?.aborted) throw abortedError(signal, 'the encode was aborted before it started');
    const cancel = new Int32Array(1);
    const onAbort = () => {
      cancel[0] = 1;
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      return await native.encode({
        ...args,
        stages: options.stages ?? false,
        checkFinite: options.checkFinite ?? true,
        cancel,
        ...(onProgress ? { onProgress: (e) => onProgress({ image: 0, images, block: e.block, blocks: e.blocks, ms: e.ms }) } : {}),
      });
    } catch (e) {
      const err = toTesseraError(e);
      throw err.code === 'ERR_ABORTED' && signal?.aborted ? abortedError(signal, err.message) : err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.info.memory.peakRss = peakRss();
    }
  }

  get #pre(): Preprocessor {
    this.#preprocessor ??= makePreprocessor(
      this.spec.family,
      this.preprocessorConfig,
      this.info.path,
      this.spec.dims,
      (patches) => this.#checkOpen().sizing(patches).tokens,
    );
    return this.#preprocessor;
  }

  #checkOpen(): NativeTower {
    if (!this.#native || this.#closing) throw new TesseraError('ERR_CLOSED', 'the tower is closed');
    return this.#native;
  }

  /** Predicts sizes and memory for an image (its header is read; nothing is decoded) or a size. */
  async estimate(input: ImageInput | { width: number; height: number }, options: PreprocessOptions = {}): Promise<Estimate> {
    this.#checkOpen();
    return this.#estimate(input, parseArgument(preprocessOptionsSchema(this.spec.family), options, 'estimate options'));
  }

  async #estimate(input: ImageInput | { width: number; height: number }, options: PreprocessOptions): Promise<Estimate> {
    const native = this.#checkOpen();
    const size = isSize(input) ? checkSize(input) : await headerSize(input, options.maxInputPixels);
    const plan = this.#pre.plan(size, options);
    if (plan.patches > MAX_INT32) throw this.#tooLarge(plan, options, `${plan.patches} patch rows, more than one encode can address (${MAX_INT32})`);
    const { scratchBytes, ioBytes } = native.sizing(plan.patches);
    const weightBytes = this.info.memory.weightBytes;
    return { ...plan, scratchBytes, weightBytes, ioBytes, peakBytes: weightBytes + scratchBytes + ioBytes };
  }

  /** What HF's processor (PIL backend) returns for this image: pixel rows plus grid or positions. */
  async preprocess(input: ImageInput, options: PreprocessOptions = {}): Promise<Prepared> {
    this.#checkOpen();
    const opts = parseArgument(preprocessOptionsSchema(this.spec.family), options, 'preprocess options');
    this.#admit(await this.#estimate(input, opts), opts);
    return this.#pre.run(input, opts);
  }

  /**
   * Refuses, before any work, an image whose predicted peak passes memoryBudget
   * (ERR_IMAGE_TOO_LARGE) or, without a budget, this machine's whole memory (ERR_OUT_OF_MEMORY).
   */
  #admit(e: Estimate, options: PreprocessOptions): void {
    if (this.#memoryBudget !== undefined && e.peakBytes > this.#memoryBudget)
      throw this.#tooLarge(e, options, `about ${e.peakBytes} bytes to encode, over memoryBudget ${this.#memoryBudget}`);
    const total = totalmem();
    if (this.#memoryBudget === undefined && e.peakBytes > total)
      throw this.#tooLarge(e, options, `about ${e.peakBytes} bytes to encode, more than this machine's ${total} bytes of memory`, 'ERR_OUT_OF_MEMORY', new ExceedsMachineMemory(e.peakBytes, total));
  }

  #tooLarge(p: Plan, options: PreprocessOptions, why: string, code: 'ERR_IMAGE_TOO_LARGE' | 'ERR_OUT_OF_MEMORY' = 'ERR_IMAGE_TOO_LARGE', cause?: Error): TesseraError {
    const given = (['minPixels', 'maxPixels', 'maxSoftTokens'] as const).filter((k) => options[k] !== undefined).map((k) => `${k} ${options[k]}`);
    const by = given.length ? ` (sized by ${given.join(', ')})` : '';
    return new TesseraError(code, `the image resized to ${p.resized.width}x${p.resized.height}${by} needs ${p.patches} patches: ${why}`, cause ? { cause } : undefined);
  }

  /** Decodes, preprocesses and encodes one image (a path, Buffer or Uint8Array). */
  async encode(input: ImageInput, options: EncodeOptions = {}): Promise<EncodeResult> {
    const item = (await this.encodeBatch([input], options))[0]!;
    if (item instanceof TesseraError) throw item;
    return item;
  }

  /**
   * Encodes many images block-major (docs/design.md#batches). Every image is first sized from its header
   * alone; the images are then cut into groups whose activations fit the budget (splitBatch, from
   * the addon's own scratch formula), and each group passes every stage together, so the weights
   * are read once per group, not once per image. The next group is decoded while the current one
   * encodes. An image that cannot be read or encoded gets its TesseraError in its place in the
   * result; the others are still encoded. Aborting or closing rejects the whole call.
   */
  async encodeBatch(inputs: readonly ImageInput[], options: EncodeOptions = {}): Promise<(EncodeResult | TesseraError)[]> {
    this.#checkOpen();
    if (!Array.isArray(inputs)) throw new TesseraError('ERR_INVALID_ARGUMENT', 'encodeBatch expects an array of images');
    options = parseArgument(encodeOptionsSchema(this.spec.family), options, 'encode options');
    const out: (EncodeResult | TesseraError)[] = new Array(inputs.length);
    // Options were checked above: what fails from here on fails for one input, in its own slot.
    const named = (i: number, e: unknown) => this.#named(i, inputs[i]!, e);
    const plans = await Promise.all(inputs.map((input, i) => this.#plan(input, options).catch((e) => named(i, e))));
    const ok: number[] = [];
    plans.forEach((p, i) => (p instanceof TesseraError ? (out[i] = p) : ok.push(i)));
    const groups = splitBatch(
      ok.map((i) => (plans[i] as Estimate).patches),
      (rows) => this.#groupBytes(rows),
      this.#activationBudget(),
    ).map((g) => g.map((k) => ok[k]!));

    const prepare = (group: number[]) =>
      Promise.all(group.map((i) => this.#pre.run(inputs[i]!, options).catch((e) => named(i, e))));
    let next = groups.length ? prepare(groups[0]!) : undefined;
    for (let g = 0; g < groups.length; g++) {
      const prepared = await next!;
      next = g + 1 < groups.length ? prepare(groups[g + 1]!) : undefined;
      const members: { index: number; prepared: Prepared }[] = [];
      groups[g]!.forEach((index, k) => {
        const p = prepared[k]!;
        if (p instanceof TesseraError) out[index] = p;
        else members.push({ index, prepared: p });
      });
      if (members.length) (await this.#encodeGroup(members, inputs.length, options)).forEach((r, k) => (out[members[k]!.index] = r));
    }
    return out;
  }

  /**
   * Encodes images as they come (an array, an iterable or an async iterable of paths, Buffers or
   * Uint8Arrays) and yields each one's result, or its TesseraError, with its index and input, as
   * soon as its group finishes (docs/design.md#batches). Inputs are taken `batch` (default DEFAULT_BATCH, 4) at a
   * time: their headers are read, they are sized and admitted, cut where activations would pass
   * the budget, decoded, and encoded block-major; the next group is read and decoded while the
   * current one encodes, so at most two groups of pixels are held however many images there are.
   * Options are checked at the call. Aborting (signal) or closing rejects the pending next() with
   * ERR_ABORTED / ERR_CLOSED; everything yielded before stays valid.
   */
  encodeMany(inputs: Iterable<ImageInput> | AsyncIterable<ImageInput>, options: EncodeManyOptions = {}): AsyncGenerator<EncodeManyItem, void, undefined> {
    this.#checkOpen();
    const iterable = inputs as unknown as Record<symbol, unknown> | null;
    if (iterable === null || typeof iterable !== 'object' || (typeof iterable[Symbol.iterator] !== 'function' && typeof iterable[Symbol.asyncIterator] !== 'function') || inputs instanceof Uint8Array)
      throw new TesseraError('ERR_INVALID_ARGUMENT', 'encodeMany expects an array, iterable or async iterable of images');
    const { batch, ...encode } = parseArgument(encodeManyOptionsSchema(this.spec.family), options, 'encodeMany options');
    return this.#encodeMany(inputs, encode, batch ?? DEFAULT_BATCH, Array.isArray(inputs) ? inputs.length : 0);
  }

  async *#encodeMany(
    inputs: Iterable<ImageInput> | AsyncIterable<ImageInput>,
    options: EncodeOptions,
    groupImages: number,
    total: number,
  ): AsyncGenerator<EncodeManyItem, void, undefined> {
    type Entry = { index: number; input: ImageInput };
    type Window = { failed: EncodeManyItem[]; groups: { members: Entry[]; prepared: Promise<(Prepared | TesseraError)[]> }[] };
    const source: AsyncIterator<ImageInput> | Iterator<ImageInput> =
      Symbol.asyncIterator in inputs ? (inputs as AsyncIterable<ImageInput>)[Symbol.asyncIterator]() : (inputs as Iterable<ImageInput>)[Symbol.iterator]();
    let index = 0;
    let done = false;
    const failure = (e: Entry, err: unknown): EncodeManyItem => ({ ...e, error: this.#named(e.index, e.input, err) });
    // Reads the next `groupImages` inputs' headers, admits them, cuts them where activations would
    // pass the budget and starts decoding them.
    const stage = async (): Promise<Window | undefined> => {
      const window: Entry[] = [];
      while (!done && window.length < groupImages) {
        const n = await source.next();
        if (n.done) done = true;
        else window.push({ index: index++, input: n.value });
      }
      if (!window.length) return undefined;
      const plans = await Promise.all(window.map((e) => this.#plan(e.input, options).catch((err: unknown) => failure(e, err))));
      const failed: EncodeManyItem[] = [];
      const ok: { entry: Entry; plan: Estimate }[] = [];
      plans.forEach((p, k) => ('error' in p ? failed.push(p as EncodeManyItem) : ok.push({ entry: window[k]!, plan: p as Estimate })));
      const groups = splitBatch(
        ok.map((o) => o.plan.patches),
        (rows) => this.#groupBytes(rows),
        this.#activationBudget(),
      ).map((g) => {
        const members = g.map((k) => ok[k]!.entry);
        // One image at a time (while the previous group encodes): decoding a group's images at once
        // would spread them over the thread pool's per-thread allocator arenas, and a long run then
        // keeps every arena at its high-water mark (docs/decisions/0014-bulk-run-memory.md).
        const prepared = (async () => {
          const out: (Prepared | TesseraError)[] = [];
          for (const m of members) out.push(await this.#pre.run(m.input, options).catch((err: unknown) => this.#named(m.index, m.input, err)));
          return out;
        })();
        prepared.catch(() => undefined); // awaited below; never left unhandled if the caller stops early
        return { members, prepared };
      });
      return { failed, groups };
    };
    let next = stage();
    next.catch(() => undefined);
    try {
      for (;;) {
        const current = await next;
        if (!current) return;
        if (options.signal?.aborted) throw abortedError(options.signal, 'encodeMany was aborted');
        next = stage();
        next.catch(() => undefined);
        yield* current.failed;
        for (const group of current.groups) {
          const prepared = await group.prepared;
          const members: { index: number; prepared: Prepared }[] = [];
          const inputsOf = new Map<number, ImageInput>();
          for (const [k, p] of prepared.entries()) {
            const entry = group.members[k]!;
            if (p instanceof TesseraError) yield { ...entry, error: p };
            else members.push({ index: entry.index, prepared: p }), inputsOf.set(entry.index, entry.input);
          }
          if (!members.length) continue;
          const results = await this.#encodeGroup(members, total, options);
          for (const [k, r] of results.entries()) {
            const { index: i } = members[k]!;
            const input = inputsOf.get(i)!;
            yield r instanceof TesseraError ? { index: i, input, error: r } : { index: i, input, result: r };
          }
        }
      }
    } finally {
      // Stopped early (break, abort, close): let the read-ahead settle and close the source.
      await next.catch(() => undefined);
      if (!done) await (source.return?.() as Promise<unknown> | undefined)?.catch?.(() => undefined);
    }
  }

  /**
   * A per-input failure, its message naming the input: by its path when it has one (the message of
   * a file's error names it already), else by its index. The cause is the error's own (ENOENT, the
   * decoder's), not a wrapper.
   */
  #named(i: number, input: ImageInput, e: unknown): TesseraError {
    const err = toTesseraError(e, 'ERR_IMAGE_DECODE');
    if (err.code === 'ERR_CLOSED') throw err;
    const message = typeof input === 'string' ? (err.message.includes(input) ? err.message : `${input}: ${err.message}`) : `input ${i}: ${err.message}`;
    return new TesseraError(err.code, message, { cause: err.cause ?? err });
  }

  /** Sizes an image from its header and admits it (ERR_IMAGE_TOO_LARGE / ERR_OUT_OF_MEMORY before any work). */
  async #plan(input: ImageInput, options: EncodeOptions): Promise<Estimate> {
    const e = await this.#estimate(input, options);
    this.#admit(e, options);
    return e;
  }

  /** Activations plus f32 input and output of one encode of `rows` patch rows (the addon's sizing). */
  #groupBytes(rows: number): number {
    const s = this.#checkOpen().sizing(rows);
    return s.scratchBytes + s.ioBytes;
  }

  #activationBudget(): number {
    return activationBudget({ memoryBudget: this.#memoryBudget, weightBytes: this.info.memory.weightBytes, freeMem: freemem() });
  }

  /**
   * Encodes one group block-major and cuts the output per image; a failure of the group is every
   * member's (abort and close reject instead). Each image's encodeMs is its share of the group's
   * wall time in proportion to its patch rows (the group's own time is kept beside it).
   */
  async #encodeGroup(group: { index: number; prepared: Prepared }[], images: number, options: EncodeOptions): Promise<(EncodeResult | TesseraError)[]> {
    const items = group.map((g) => g.prepared);
    const onProgress = options.onProgress && ((p: Progress) => options.onProgress!({ ...p, image: group[0]!.index, images }));
    const started = performance.now();
    let raw: NativeEncodeResult;
    try {
      raw = await this.#enqueue((native) =>
        this.#run(native, { ...options, onProgress }, group.length, concatPrepared(items, native.patchWidth)),
      );
    } catch (e) {
      const err = toTesseraError(e);
      if (err.code === 'ERR_ABORTED' || err.code === 'ERR_CLOSED') throw err;
      return group.map(() => err);
    }
    const groupEncodeMs = performance.now() - started;
    const groupRows = items.reduce((a, p) => a + p.patches, 0);
    return splitResult(raw, items, options.stages ?? false).map((r, k) => {
      const p = items[k]!;
      return {
        ...r,
        ...(p.grid ? { grid: [p.grid] } : { positions: p.positions! }),
        decoded: p.decoded,
        resized: p.resized,
        timings: {
          decodeMs: p.timings.decodeMs,
          preprocessMs: p.timings.preprocessMs,
          encodeMs: (groupEncodeMs * p.patches) / groupRows,
          groupEncodeMs,
          groupImages: items.length,
        },
      };
    });
  }

  /** Scratch bytes the addon would allocate to encode `patches` patch rows (its own formula). */
  scratchBytes(patches: number): number {
    if (!this.#native || this.#closing) throw new TesseraError('ERR_CLOSED', 'the tower is closed');
    return this.#native.sizing(patches).scratchBytes;
  }

  /**
   * Bytes read from the weight files so far, what the store holds, and `packedWeights`: the linear
   * weights the backend rearranged in place at open (the CPU's panel layout; `resident` only).
   */
  stats(): ReturnType<NativeTower['stats']> {
    if (!this.#native || this.#closing) throw new TesseraError('ERR_CLOSED', 'the tower is closed');
    return this.#native.stats();
  }

  /**
   * Packed folders: reads every stage again and compares it with the checksum `tessera pack`
   * recorded (one pass over the weights file, 4 MiB at a time). A stream or mapped tower reads its
   * file as it goes, so this is how a change made in place since open (weights zeroed, a stage
   * overwritten) is caught: ERR_WEIGHTS_CORRUPT naming the first stage that differs.
   */
  async verify(): Promise<void> {
    this.#checkOpen();
    if (this.spec.source !== 'packed')
      throw new TesseraError('ERR_INVALID_ARGUMENT', `verify: only packed folders (tessera pack) record checksums; ${this.info.path} is a ${this.spec.source} source`);
    await loadPacked(this.info.path, { verify: true });
  }

  /** Waits for work in flight, then frees everything. Idempotent. */
  close(): Promise<void> {
    if (!this.#closing) {
      this.#closing = this.#queue.then(() => {
        this.#native?.close();
        this.#native = undefined;
      });
    }
    return this.#closing;
  }
}
