// `tessera encode <image|folder|-...>` (docs/design.md#command-line), built on tower.encodeMany: one row per
// image (file, size, grid, tokens, ms), a progress bar with images/s and ETA on a TTY, a summary;
// --json prints JSON Lines instead. Outputs: --out writes one safetensors file for the run;
// --out-dir writes one output per image (src/bulk/output-dir.ts), skips images whose output is up
// to date (--force redoes them) and keeps DIR/manifest.jsonl. Exit 0 when every input was encoded
// (or was up to date), 1 when some failed (each named with its code; the others are still
// written), 2 for usage or model errors; 130 when interrupted (SIGINT/SIGTERM: the encode stops
// between blocks, finished --out-dir outputs stay, the partial --out file is removed).
import { mkdir } from 'node:fs/promises';
import { basename, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { TesseraError, toTesseraError } from '../errors.js';
import { checkSoftTokenBudget, disableDecodeCache } from '../image/index.js';
import { BulkOutputOptionsSchema, OpenOptionsSchema, encodeManyOptionsSchema, parseArgument, type BulkOutputOptions } from '../options.js';
import { VisionTower, type EncodeOptions, type EncodeResult, type OpenOptions } from '../tower.js';
import { collectInputs, type BulkInput } from '../bulk/inputs.js';
import {
  checkDistinctOutputs,
  outputJob,
  primaryOutput,
  removeStaleTemporaries,
  stampInput,
  upToDateRecord,
  writeImageOutputs,
  type InputStamp,
  type OutputJob,
} from '../bulk/output-dir.js';
import { Manifest } from '../bulk/manifest.js';
import { patchesOf, resultTensors } from '../bulk/formats/tensors.js';
import { ioError } from '../io/io-error.js';
import { DEMO_NOTICE, demoTowerPath, tesseraVersion } from './demo.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, formatBytes, type CliIo } from './io.js';
import { ProgressBar } from './progress.js';
import { MemoryReclaimer } from './reclaim.js';
import { SafetensorsWriter } from './safetensors-writer.js';

export const ENCODE_USAGE = `usage: tessera encode <image|folder|-...> [--model <path>] [--out file.safetensors | --out-dir DIR]
                      [--format safetensors|npy|vllm|sglang] [--force] [--hash-inputs] [--exclude GLOB]...
                      [--backend auto|cpu|metal|metal-emulated] [--residency auto|stream|mapped|resident]
                      [--precision f32|bf16] [--min-pixels N] [--max-pixels N] [--max-soft-tokens 70|140|280|560|1120] [--batch N]
                      [--stages] [--json]
Folders are read recursively (image extensions, any case); '-' reads a newline-separated list of paths from stdin.
Without --model, a small demo tower with random weights is used.`;

class UsageError extends Error {}

function positiveInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n <= 0) throw new UsageError(`--${name} must be a positive integer (got '${v}')`);
  return n;
}

/** A zod refusal of a flag object, worded with the flag's name. */
function flagged<T>(check: () => T): T {
  try {
    return check();
  } catch (e) {
    const flag = (s: string) => '--' + s.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
    throw new UsageError((e as Error).message.replace(/^[^:]+: option '([^']+)'/, (_, k: string) => flag(k)).replace(/unknown option '([^']+)'/, (_, k: string) => `unknown option ${flag(k)}`));
  }
}

interface Parsed {
  args: string[];
  model: string | undefined;
  bulk: BulkOutputOptions;
  open: OpenOptions;
  encode: EncodeOptions;
  batch: number;
  json: boolean;
}

function parse(args: readonly string[]): Parsed | 'help' {
  const { values, positionals } = parseArgs({
    args: [...args],
    allowPositionals: true,
    strict: true,
    options: {
      model: { type: 'string' },
      out: { type: 'string' },
      'out-dir': { type: 'string' },
      format: { type: 'string' },
      force: { type: 'boolean' },
      'hash-inputs': { type: 'boolean' },
      exclude: { type: 'string', multiple: true },
      backend: { type: 'string' },
      residency: { type: 'string' },
      precision: { type: 'string' },
      'min-pixels': { type: 'string' },
      'max-pixels': { type: 'string' },
      'max-soft-tokens': { type: 'string' },
      batch: { type: 'string' },
      stages: { type: 'boolean' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (positionals.length === 0) throw new UsageError('no images given');
  const backends = ['auto', 'cpu', 'metal', 'metal-emulated'];
  if (values.backend !== undefined && !backends.includes(values.backend))
    throw new UsageError(`--backend must be one of ${backends.join(', ')} (got '${values.backend}')`);
  const residencies = ['auto', 'stream', 'mapped', 'resident'];
  if (values.residency !== undefined && !residencies.includes(values.residency))
    throw new UsageError(`--residency must be one of ${residencies.join(', ')} (got '${values.residency}')`);
  const maxSoftTokens = positiveInt('max-soft-tokens', values['max-soft-tokens']);
  if (maxSoftTokens !== undefined) {
    try {
      checkSoftTokenBudget(maxSoftTokens, '--max-soft-tokens');
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  }
  const encode: EncodeOptions = { stages: values.stages ?? false };
  const minPixels = positiveInt('min-pixels', values['min-pixels']);
  const maxPixels = positiveInt('max-pixels', values['max-pixels']);
  if (minPixels !== undefined) encode.minPixels = minPixels;
  if (maxPixels !== undefined) encode.maxPixels = maxPixels;
  if (maxSoftTokens !== undefined) encode.maxSoftTokens = maxSoftTokens;
  const batch = positiveInt('batch', values.batch) ?? 4;
  // The same schemas as the API's: encodeMany's options (family-free: the model is not open yet) and the bulk flags.
  flagged(() => parseArgument(encodeManyOptionsSchema(), { ...encode, batch }, 'tessera encode'));
  const bulk = flagged(() =>
    parseArgument(
      BulkOutputOptionsSchema,
      {
        ...(values['out-dir'] !== undefined ? { outDir: values['out-dir'] } : {}),
        ...(values.out !== undefined ? { out: values.out } : {}),
        ...(values.format !== undefined ? { format: values.format } : {}),
        ...(values.force ? { force: true } : {}),
        ...(values['hash-inputs'] ? { hashInputs: true } : {}),
        ...(values.exclude ? { exclude: values.exclude } : {}),
      },
      'tessera encode',
    ),
  );
  const open: OpenOptions = {};
  if (values.backend) open.backend = values.backend as OpenOptions['backend'];
  if (values.residency) open.residency = values.residency as OpenOptions['residency'];
  if (values.precision) open.precision = values.precision as OpenOptions['precision'];
  flagged(() => parseArgument(OpenOptionsSchema, open, 'tessera encode'));
  return { args: positionals, model: values.model, bulk, open, encode, batch, json: values.json ?? false };
}

function gridText(r: EncodeResult): string {
  if (r.grid?.length) return r.grid.map((g) => `${g.t}x${g.h}x${g.w}`).join('+');
  if (r.positions) {
    let w = 0, h = 0;
    for (let i = 0; i < r.positions.length; i += 2) (w = Math.max(w, r.positions[i]! + 1)), (h = Math.max(h, r.positions[i + 1]! + 1));
    return `${h}x${w}`;
  }
  return '-';
}

/** --out: one image's tensors under `image.<i>.` (names of bulk/formats/tensors.ts). */
async function addToRunFile(w: SafetensorsWriter, i: number, r: EncodeResult): Promise<void> {
  for (const t of resultTensors(r)) await w.add(`image.${i}.${t.name}`, t.shape, t.data);
}

/** An image handed to encodeMany, with its stamp (--out-dir) taken before it was read. */
interface Planned {
  input: BulkInput;
  index: number;
  stamp?: InputStamp;
}

export async function encodeCommand(args: readonly string[], io: CliIo): Promise<number> {
  let parsed: Parsed | 'help';
  try {
    parsed = parse(args);
  } catch (e) {
    io.err(`tessera encode: ${(e as Error).message}\n${ENCODE_USAGE}`);
    return EXIT_USAGE;
  }
  if (parsed === 'help') {
    io.out(ENCODE_USAGE);
    return EXIT_OK;
  }
  const o = parsed;
  const started = performance.now();

  let inputs: BulkInput[];
  try {
    inputs = await collectInputs(o.args, { exclude: o.bulk.exclude, ...(io.stdin ? { stdin: io.stdin } : {}) });
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera encode: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  if (inputs.length === 0) {
    io.err(`tessera encode: no images found in ${o.args.join(', ')}${o.bulk.exclude.length ? ` (after --exclude ${o.bulk.exclude.join(', ')})` : ''}`);
    return EXIT_USAGE;
  }

  let modelPath = o.model;
  const demo = modelPath === undefined;
  let tower: VisionTower;
  try {
    if (demo) {
      io.err(DEMO_NOTICE);
      modelPath = await demoTowerPath();
    }
    tower = await VisionTower.open(modelPath!, o.open);
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera encode: cannot open model ${modelPath ?? '(demo)'}: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }

  let job: OutputJob | undefined;
  try {
    if (o.bulk.outDir !== undefined) {
      job = outputJob(tower, {
        dir: o.bulk.outDir,
        format: o.bulk.format,
        model: modelPath!,
        options: o.encode,
        hashInputs: o.bulk.hashInputs,
        notes: { tessera_version: tesseraVersion(), demo_random_weights: String(demo) },
      });
      checkDistinctOutputs(job, inputs);
    }
    // The family is known now: its own sizing keys only (a Gemma 4 tower refuses --max-pixels).
    parseArgument(encodeManyOptionsSchema(tower.spec.family), { ...o.encode, batch: o.batch }, 'tessera encode');
  } catch (e) {
    await tower.close();
    io.err(`tessera encode: ${toTesseraError(e).message}\n${ENCODE_USAGE}`);
    return EXIT_USAGE;
  }

  let writer: SafetensorsWriter | undefined;
  let manifest: Manifest | undefined;
  const bar = new ProgressBar({ ...io, tty: io.tty && !o.json }, inputs.length);
  const fileWidth = Math.min(60, Math.max(4, ...inputs.slice(0, 1000).map((f) => f.path.length)));
  const cols = (c: string[]) =>
    [c[0]!.padEnd(fileWidth), c[1]!.padStart(11), c[2]!.padStart(12), c[3]!.padStart(7), c[4]!.padStart(9)].join('  ').trimEnd();
  let failed = 0;
  let skipped = 0;
  let encoded = 0;
  const failedInputs: number[] = [];
  const outName = (p: string) => (job ? relative(job.dir, p).split('\\').join('/') : p);

  const reportFailure = async (index: number, input: BulkInput, err: TesseraError) => {
    failed++;
    failedInputs.push(index);
    await manifest?.append({ input: input.path, output: null, status: 'failed', error: { code: err.code, message: err.message } });
    bar.above(() => {
      if (o.json) io.out(JSON.stringify({ type: 'image', index, file: input.path, ok: false, error: { code: err.code, message: err.message } }));
      else {
        io.out(cols([input.path, 'failed', err.code, '-', '-']));
        io.err(`tessera encode: ${input.path}: ${err.code}: ${err.message}`);
      }
    });
    bar.imageDone(true);
  };

  try {
    if (job) {
      try {
        await mkdir(job.dir, { recursive: true });
      } catch (e) {
        throw ioError(job.dir, 'cannot create folder', e);
      }
      const stale = await removeStaleTemporaries(job.dir);
      if (stale && !o.json) io.err(`tessera encode: removed ${stale} temporary file${stale === 1 ? '' : 's'} left in ${job.dir} by an interrupted run`);
      manifest = await Manifest.open(job.dir);
    } else if (o.bulk.out) writer = await SafetensorsWriter.create(o.bulk.out);
    if (!o.json) {
      io.out(`model: ${modelPath}${demo ? ' (demo tower, RANDOM weights)' : ''} — ${tower.info.family}, ${tower.info.depth} blocks, ` +
        `hidden ${tower.info.hidden}, output width ${tower.info.outHidden}, backend ${tower.info.backend}, residency ${tower.info.residency}`);
      io.out(cols(['file', 'size', 'grid', 'tokens', 'ms']));
    }

    // Feeds encodeMany lazily: with --out-dir, an image whose output is up to date is reported and
    // not encoded; each image is stamped (size, mtime) before it is read.
    const fed: Planned[] = [];
    const jobNow = job;
    async function* feed(): AsyncGenerator<string> {
      for (const [index, input] of inputs.entries()) {
        if (!jobNow) {
          fed.push({ input, index });
          yield input.path;
          continue;
        }
        const stamp = await stampInput(input.path, jobNow.hashInputs).catch(() => undefined);
        const rec = stamp && !o.bulk.force ? await upToDateRecord(jobNow, input, stamp) : undefined;
        if (rec) {
          skipped++;
          const tokens = Number(rec['tokens']);
          await manifest!.append({ input: input.path, output: outName(primaryOutput(jobNow, input)), status: 'skipped', tokens });
          bar.above(() => {
            if (o.json) io.out(JSON.stringify({ type: 'image', index, file: input.path, ok: true, skipped: true, tokens, output: outName(primaryOutput(jobNow, input)) }));
            else io.out(cols([input.path, 'up to date', '-', String(tokens), '-']));
          });
          bar.imageDone(false);
          continue;
        }
        fed.push({ input, index, ...(stamp ? { stamp } : {}) });
        yield input.path;
      }
    }

    disableDecodeCache();
    const reclaimer = new MemoryReclaimer();
    const items = tower.encodeMany(feed(), {
      ...o.encode,
      batch: o.batch,
      ...(io.signal ? { signal: io.signal } : {}),
      ...(bar.enabled ? { onProgress: (p) => bar.block(p.block, p.blocks) } : {}),
    });
    for await (const item of items) {
      const { input, index, stamp } = fed[item.index]!;
      if (item.error) {
        await reportFailure(index, input, item.error);
        continue;
      }
      const r = item.result;
      let output: string | undefined;
      if (job) {
        // The stamp was taken before the read; an input that could not be stat'ed then is stamped now.
        const written = await writeImageOutputs(job, input, r, stamp ?? (await stampInput(input.path, job.hashInputs)));
        output = outName(written.primary);
      } else if (writer) await addToRunFile(writer, index, r);
      encoded++;
      const t = r.timings;
      const ms = { decode: t.decodeMs, preprocess: t.preprocessMs, encode: t.encodeMs, groupEncode: t.groupEncodeMs ?? t.encodeMs, groupImages: t.groupImages ?? 1 };
      await manifest?.append({ input: input.path, output: output ?? null, status: 'encoded', tokens: r.tokens, ms: { decode: ms.decode, preprocess: ms.preprocess, encode: ms.encode } });
      bar.above(() => {
        if (o.json) {
          io.out(
            JSON.stringify({
              type: 'image', index, file: input.path, ok: true, width: r.decoded?.width ?? null, height: r.decoded?.height ?? null,
              grid: r.grid ? r.grid.map((g) => [g.t, g.h, g.w]) : null, patches: patchesOf(r), tokens: r.tokens,
              embeddingWidth: r.width, ms, ...(output !== undefined ? { output } : {}),
            }),
          );
        } else {
          const size = r.decoded ? `${r.decoded.width}x${r.decoded.height}` : '?';
          io.out(cols([input.path, size, gridText(r), String(r.tokens), (t.decodeMs + t.preprocessMs + t.encodeMs).toFixed(0)]));
        }
      });
      bar.imageDone(true);
      reclaimer.afterImage();
    }
    bar.clear();
    await manifest?.compact(inputs.map((i) => i.path));
    if (writer) {
      await writer.finish({
        inputs: JSON.stringify(inputs.map((i) => i.path)),
        model: modelPath!,
        family: tower.info.family,
        tessera_version: tesseraVersion(),
        demo_random_weights: String(demo),
        failed: JSON.stringify(failedInputs.sort((a, b) => a - b)),
      });
    }
  } catch (e) {
    bar.clear();
    await writer?.abort();
    await manifest?.compact(inputs.map((i) => i.path)).catch(() => undefined);
    const err = toTesseraError(e);
    await tower.close();
    if (err.code === 'ERR_ABORTED') {
      const kept = job ? `; ${encoded} output${encoded === 1 ? '' : 's'} written to ${job.dir} this run are kept, rerun to finish the rest` : o.bulk.out ? `; ${o.bulk.out} not written` : '';
      io.err(`tessera encode: interrupted${kept}`);
      return EXIT_INTERRUPTED;
    }
    io.err(`tessera encode: ${err.code}: ${err.message}`);
    return err.code === 'ERR_INVALID_ARGUMENT' ? EXIT_USAGE : EXIT_SOME_FAILED;
  }
  await tower.close();
  const seconds = (performance.now() - started) / 1000;
  const peak = process.resourceUsage().maxRSS * 1024;
  const out = job ? job.dir : o.bulk.out;
  if (o.json) {
    io.out(JSON.stringify({ type: 'summary', images: inputs.length, encoded, skipped, failed, seconds, imagesPerSecond: encoded / seconds,
      peakRssBytes: peak, model: modelPath, family: tower.info.family, demo, out: out ?? null, format: job?.format ?? (o.bulk.out ? 'safetensors' : null) }));
  } else {
    io.out(`encoded ${encoded} of ${inputs.length} image${inputs.length === 1 ? '' : 's'}${skipped ? ` (${skipped} up to date, skipped)` : ''} in ${seconds.toFixed(2)} s ` +
      `(${(encoded / seconds).toFixed(2)} images/s); peak memory ${formatBytes(peak)}${out ? `; wrote ${out}` : ''}`);
    if (demo) io.out(`(demo tower: ${basename(modelPath!)} has RANDOM weights)`);
  }
  return failed ? EXIT_SOME_FAILED : EXIT_OK;
}
