// VisionTower: the public API (docs/design.md#public-surface). It validates options, resolves the backend and the
// residency, hands the TowerSpec to the addon and queues encodes (one at a time per tower; the
// work itself runs off the JS thread in the addon).
import { freemem, totalmem } from 'node:os';
import { z } from 'zod';
import { TesseraError, toTesseraError } from './errors.js';
import { addon, type NativeEncodeResult, type NativeTower } from './native.js';
import { loadModel } from './spec/load.js';
import { headerSize, makePreprocessor, type Plan, type Prepared, type PreprocessOptions, type Preprocessor } from './prepare.js';
import type { ImageInput } from './image/index.js';
import { activationBudget, chooseResidency, heldWeightBytes, splitBatch, type Residency, type WeightMemory } from './residency/index.js';
import { concatPrepared, splitResult } from './batch.js';
import type { TowerSpec } from './spec/types.js';
import { describe, peakRss, type MemoryInfo, type TowerInfo } from './tower-info.js';

const OpenOptionsSchema = z
  .object({
    backend: z.enum(['auto', 'cpu', 'metal', 'metal-emulated']).default('auto'),
    residency: z.enum(['auto', 'stream', 'mapped', 'resident']).default('auto'),
    slots: z.number().int().min(1).max(16).default(2),
    memoryBudget: z.number().int().positive().optional(),
    threads: z.number().int().min(0).max(1024).default(0),
  })
  .strict();

export type OpenOptions = z.input<typeof OpenOptionsSchema>;

export interface Progress {
  /** Index of the first image of the chunk being encoded, and the number of images in the call. */
  image: number;
  images: number;
  /** Stages done (patch embedding, each block, each merger) and their total. */
  block: number;
  blocks: number;
  /** Wall time of the stage just done, in ms (waiting for its weights included). */
  ms: number;
}

export interface EncodeOptions extends PreprocessOptions {
  stages?: boolean;
  signal?: AbortSignal;
  onProgress?: (p: Progress) => void;
  /** Scan every stage for inf/NaN (ERR_NUMERIC). Default true. */
  checkFinite?: boolean;
}

export interface Grid {
  t: number;
  h: number;
  w: number;
}

export type PixelInput =
  | { pixelValues: Float32Array; grid: Grid | Grid[] }
  | { pixelValues: Float32Array; positions: Int32Array; imageRows?: number[] };

export interface EncodeResult {
  embeddings: Float32Array;
  tokens: number;
  width: number;
  grid?: Grid[];
  positions?: Int32Array;
  deepstack?: Float32Array[];
  stages?: Record<string, Float32Array>;
  /** encode / encodeBatch: the image's upright decoded size and the size it was resized to. */
  decoded?: { width: number; height: number };
  resized?: { width: number; height: number };
  timings: { decodeMs: number; preprocessMs: number; encodeMs: number };
}

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

function resolveBackend(requested: string): string {
  if (requested === 'auto') return process.platform === 'darwin' && process.arch === 'arm64' ? 'metal' : 'cpu';
  if (requested === 'metal' && !(process.platform === 'darwin' && process.arch === 'arm64'))
    throw new TesseraError('ERR_BACKEND_UNAVAILABLE', `backend 'metal' needs macOS on Apple Silicon (this is ${process.platform}/${process.arch})`);
  return requested;
}

function normaliseGrid(grid: Grid | Grid[] | number[][]): Grid[] {
  const list = Array.isArray(grid) ? grid : [grid];
  return list.map((g, i) => {
    const [t, h, w] = Array.isArray(g) ? g : [g.t, g.h, g.w];
    if (![t, h, w].every((v) => Number.isSafeInteger(v) && (v as number) > 0))
      throw new TesseraError('ERR_INVALID_ARGUMENT', `grid[${i}] must hold positive integers t, h, w`);
    return { t: t!, h: h!, w: w! };
  });
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
    const parsed = OpenOptionsSchema.safeParse(options);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new TesseraError('ERR_INVALID_ARGUMENT', `open option '${issue.path.join('.') || '(root)'}': ${issue.message}`);
    }
    const o = parsed.data;
    const backend = resolveBackend(o.backend);
    const model = await loadModel(path);
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
    let native: NativeTower;
    try {
      native = await lib.openTower(model.spec, { backend, residency, threads: o.threads, slots: o.slots });
    } catch (e) {
      throw toTesseraError(e);
    }
    const memory: MemoryInfo = {
      residency,
      reason: decision.reason,
      slots: residency === 'stream' ? o.slots : 0,
      weightBytes: heldWeightBytes(residency, weights),
      residentBytes: weights.resident,
      slotBytes: weights.slot,
      streamBytes: weights.stream,
      fileBytes: weights.fileBytes,
      peakRss: peakRss(),
    };
    const info = describe(model.spec, path, backend, memory, lib.simdLevel);
    return new VisionTower(native, model.spec, info, model.preprocessorConfig, o.memoryBudget);
  }

  /** Runs fn after every earlier call on this tower; calls after close() reject with ERR_CLOSED. */
  #enqueue<T>(fn: (native: NativeTower) => Promise<T>): Promise<T> {
    if (this.#closing || !this.#native) return Promise.reject(new TesseraError('ERR_CLOSED', 'the tower is closed'));
    const native = this.#native;
    const run = this.#queue.then(() => fn(native));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Encodes HF-processor output: { pixelValues, grid } (Qwen) or { pixelValues, positions } (Gemma). */
  encodePixels(input: PixelInput, options: EncodeOptions = {}): Promise<EncodeResult> {
    return this.#enqueue(async (native) => {
      if (!(input?.pixelValues instanceof Float32Array))
        throw new TesseraError('ERR_INVALID_ARGUMENT', 'pixelValues must be a Float32Array');
      const cols = this.#patchWidth();
      let grids: Grid[] | undefined;
      if ('grid' in input) grids = normaliseGrid(input.grid);
      const images = grids?.length ?? ('imageRows' in input && input.imageRows ? input.imageRows.length : 1);
      const started = performance.now();
      const raw = await this.#run(native, options, images, {
        pixels: input.pixelValues,
        cols,
        ...(grids ? { grids: Int32Array.from(grids.flatMap((g) => [g.t, g.h, g.w])) } : {}),
        ...('positions' in input ? { positions: input.positions, imageRows: input.imageRows } : {}),
      });
      const result: EncodeResult = {
        embeddings: raw.embeddings,
        tokens: raw.tokens,
        width: raw.width,
        timings: { decodeMs: 0, preprocessMs: 0, encodeMs: performance.now() - started },
      };
      if (grids) result.grid = grids;
      if ('positions' in input) result.positions = input.positions;
      if (raw.deepstack.length) result.deepstack = raw.deepstack;
      if (options.stages) result.stages = Object.fromEntries(raw.stages.map((s) => [s.name, s.data]));
      return result;
    });
  }

  /** The tower's input and output for `patches` rows (f32): pixel rows in, embedding rows out. */
  #ioBytes(patches: number): number {
    const d = this.spec.dims;
    const group = this.spec.family === 'gemma4' ? d['pooling_kernel']! ** 2 : d['merge_size']! ** 2;
    return 4 * (patches * this.#patchWidth() + (patches / group) * this.info.outHidden);
  }

  #patchWidth(): number {
    const d = this.spec.dims;
    return (d['in_channels'] ?? 3) * (d['temporal_patch_size'] ?? 1) * d['patch_size']! * d['patch_size']!;
  }

  async #run(
    native: NativeTower,
    options: EncodeOptions,
    images: number,
    args: Parameters<NativeTower['encode']>[0],
  ): Promise<NativeEncodeResult> {
    const { signal, onProgress } = options;
    if (signal?.aborted) throw new TesseraError('ERR_ABORTED', 'the encode was aborted before it started');
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
      throw toTesseraError(e);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      this.info.memory.peakRss = peakRss();
    }
  }

  get #pre(): Preprocessor {
    this.#preprocessor ??= makePreprocessor(this.spec.family, this.preprocessorConfig, this.info.path);
    return this.#preprocessor;
  }

  #checkOpen(): NativeTower {
    if (!this.#native || this.#closing) throw new TesseraError('ERR_CLOSED', 'the tower is closed');
    return this.#native;
  }

  /** Predicts sizes and memory for an image (its header is read; nothing is decoded) or a size. */
  async estimate(input: ImageInput | { width: number; height: number }, options: PreprocessOptions = {}): Promise<Estimate> {
    const native = this.#checkOpen();
    const size =
      typeof input === 'object' && !(input instanceof Uint8Array) && 'width' in input
        ? input
        : await headerSize(input as ImageInput, options.maxInputPixels);
    const plan = this.#pre.plan(size, options);
    const scratchBytes = native.scratchBytes(plan.patches);
    const weightBytes = this.info.memory.weightBytes;
    const ioBytes = this.#ioBytes(plan.patches);
    return { ...plan, scratchBytes, weightBytes, ioBytes, peakBytes: weightBytes + scratchBytes + ioBytes };
  }

  /** What HF's processor (PIL backend) returns for this image: pixel rows plus grid or positions. */
  async preprocess(input: ImageInput, options: PreprocessOptions = {}): Promise<Prepared> {
    this.#checkOpen();
    if (this.#memoryBudget !== undefined) this.#admit(await this.estimate(input, options));
    return this.#pre.run(input, options);
  }

  /** ERR_IMAGE_TOO_LARGE when an image's predicted peak passes memoryBudget: before any work. */
  #admit(e: Estimate): void {
    if (this.#memoryBudget !== undefined && e.peakBytes > this.#memoryBudget)
      throw new TesseraError(
        'ERR_IMAGE_TOO_LARGE',
        `encoding this image needs about ${e.peakBytes} bytes (${e.patches} patches), over memoryBudget ${this.#memoryBudget}`,
      );
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
    const out: (EncodeResult | TesseraError)[] = new Array(inputs.length);
    const named = (i: number, e: unknown) => {
      const err = toTesseraError(e, 'ERR_IMAGE_DECODE');
      if (err.code === 'ERR_CLOSED' || err.code === 'ERR_INVALID_ARGUMENT') throw err;
      const what = typeof inputs[i] === 'string' ? ` (${inputs[i]})` : '';
      return new TesseraError(err.code, `input ${i}${what}: ${err.message}`, { cause: err });
    };
    const plan = async (input: ImageInput) => {
      const e = await this.estimate(input, options);
      this.#admit(e);
      return e;
    };
    const plans = await Promise.all(inputs.map((input, i) => plan(input).catch((e) => named(i, e))));
    const ok: number[] = [];
    plans.forEach((p, i) => (p instanceof TesseraError ? (out[i] = p) : ok.push(i)));
    const budget = activationBudget({ memoryBudget: this.#memoryBudget, weightBytes: this.info.memory.weightBytes, freeMem: freemem() });
    const groups = splitBatch(
      ok.map((i) => (plans[i] as Estimate).patches),
      (rows) => this.scratchBytes(rows) + this.#ioBytes(rows),
      budget,
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
      if (members.length) await this.#encodeGroup(members, inputs.length, options, out);
    }
    return out;
  }

  async #encodeGroup(
    group: { index: number; prepared: Prepared }[],
    images: number,
    options: EncodeOptions,
    out: (EncodeResult | TesseraError)[],
  ): Promise<void> {
    const items = group.map((g) => g.prepared);
    const onProgress = options.onProgress && ((p: Progress) => options.onProgress!({ ...p, image: group[0]!.index, images }));
    const started = performance.now();
    let raw: NativeEncodeResult;
    try {
      raw = await this.#enqueue((native) =>
        this.#run(native, { ...options, onProgress }, group.length, concatPrepared(items, this.#patchWidth())),
      );
    } catch (e) {
      const err = toTesseraError(e);
      if (err.code === 'ERR_ABORTED' || err.code === 'ERR_CLOSED') throw err;
      for (const g of group) out[g.index] = err;
      return;
    }
    const encodeMs = performance.now() - started;
    splitResult(raw, items, options.stages ?? false).forEach((r, k) => {
      const p = items[k]!;
      out[group[k]!.index] = {
        ...r,
        ...(p.grid ? { grid: [p.grid] } : { positions: p.positions! }),
        decoded: p.decoded,
        resized: p.resized,
        timings: { decodeMs: p.timings.decodeMs, preprocessMs: p.timings.preprocessMs, encodeMs },
      };
    });
  }

  /** Scratch bytes the addon would allocate to encode `patches` patch rows (its own formula). */
  scratchBytes(patches: number): number {
    if (!this.#native || this.#closing) throw new TesseraError('ERR_CLOSED', 'the tower is closed');
    return this.#native.scratchBytes(patches);
  }

  /**
   * Bytes read from the weight files so far, what the store holds, and `packedWeights`: the linear
   * weights the backend rearranged in place at open (the CPU's panel layout; `resident` only).
   */
  stats(): ReturnType<NativeTower['stats']> {
    if (!this.#native || this.#closing) throw new TesseraError('ERR_CLOSED', 'the tower is closed');
    return this.#native.stats();
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
