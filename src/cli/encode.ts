// `tessera encode <image|folder|-...>` (docs/design.md#command-line): its flags (commands.ts), then the
// inputs through the bulk job runner (src/bulk/runner.ts), rendered as one row per image (file, size,
// grid, tokens, ms), a progress bar with images/s and ETA on a TTY, and a summary; --json prints JSON
// Lines instead. Outputs: --out writes one safetensors file for the run; --out-dir has the runner write
// one output per image (src/bulk/output-dir.ts), skip images whose output is up to date (--force redoes
// them) and keep DIR/manifest.jsonl. Exit 0 when every input was encoded
// (or was up to date), 1 when some failed (each named with its code; the others are still
// written), 2 for usage or model errors; 130 when interrupted (SIGINT/SIGTERM: the encode stops
// between blocks, finished --out-dir outputs stay, the partial --out file is removed).
import { basename, relative } from 'node:path';
import { toTesseraError } from '../errors.js';
import { disableDecodeCache } from '../image/index.js';
import { BulkOutputOptionsSchema, DEFAULT_BATCH, OpenOptionsSchema, encodeManyOptionsSchema, parseArgument, type BulkOutputOptions, type OutputDtype } from '../options.js';
import { VisionTower, type EncodeOptions, type EncodeResult, type OpenOptions } from '../tower.js';
import { collectInputs, type BulkInput } from '../bulk/inputs.js';
import { checkDistinctOutputs, outputJob, type OutputJob } from '../bulk/output-dir.js';
import type { Manifest } from '../bulk/manifest.js';
import { openOutputDir, runBulk, type BulkOutcome } from '../bulk/runner.js';
import { patchesOf, resultTensors } from '../outputs/tensors.js';
import { tesseraVersion } from '../version.js';
import { DEMO_NOTICE, demoTowerPath } from './demo.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, formatBytes, type CliIo } from './io.js';
import { ENCODE } from './commands.js';
import { flagged, parseFlags, usageOf, UsageError } from './flags.js';
import { ProgressBar } from './progress.js';
import { MemoryReclaimer } from './reclaim.js';
import { SafetensorsWriter } from '../formats/safetensors-writer.js';

export const ENCODE_USAGE = usageOf(ENCODE);

interface Parsed {
  args: string[];
  model: string | undefined;
  bulk: BulkOutputOptions;
  open: OpenOptions;
  encode: EncodeOptions;
  batch: number;
  json: boolean;
  quiet: boolean;
}

function parse(args: readonly string[]): Parsed | 'help' {
  const { help, positionals, groups } = parseFlags(ENCODE, args);
  if (help) return 'help';
  if (positionals.length === 0) throw new UsageError('no images given');
  const { batch = DEFAULT_BATCH, ...encode } = groups['encode'] ?? {};
  // The same schemas as the API's: encodeMany's options (family-free: the model is not open yet), the bulk flags, open's.
  flagged(() => parseArgument(encodeManyOptionsSchema(), { ...encode, batch }, 'tessera encode'), ENCODE);
  const bulk = flagged(() => parseArgument(BulkOutputOptionsSchema, groups['bulk'] ?? {}, 'tessera encode'), ENCODE);
  const open = flagged(() => parseArgument(OpenOptionsSchema, groups['open'] ?? {}, 'tessera encode'), ENCODE);
  const cli = groups['cli'] ?? {};
  return {
    args: positionals,
    model: cli['model'] as string | undefined,
    bulk,
    open,
    encode: { stages: false, ...(encode as EncodeOptions) },
    batch: batch as number,
    json: Boolean(cli['json']),
    quiet: Boolean(cli['quiet']),
  };
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

/** --out: one image's tensors under `image.<i>.` (names of src/outputs/tensors.ts). */
async function addToRunFile(w: SafetensorsWriter, i: number, r: EncodeResult, dtype: OutputDtype): Promise<void> {
  for (const t of resultTensors(r, dtype)) await w.add(`image.${i}.${t.name}`, t.shape, t.data, t.dtype);
}

/** The summary line's counts: "encoded 82 of 302 images (218 up to date, 2 failed)". */
export function summaryText(c: { images: number; encoded: number; skipped: number; failed: number; redone?: number }): string {
  const notes = [
    ...(c.skipped ? [`${c.skipped} up to date`] : []),
    ...(c.redone ? [`${c.redone} damaged output${c.redone === 1 ? '' : 's'} redone`] : []),
    ...(c.failed ? [`${c.failed} failed`] : []),
  ];
  return `encoded ${c.encoded} of ${c.images} image${c.images === 1 ? '' : 's'}${notes.length ? ` (${notes.join(', ')})` : ''}`;
}

export async function encodeCommand(args: readonly string[], io: CliIo): Promise<number> {
  // --json is known before the flags are parsed, so that a refusal of them is a JSON record too.
  const jsonAsked = args.slice(0, args.includes('--') ? args.indexOf('--') : undefined).includes('--json');
  /** An error that ends the run (usage, inputs, model, a failed write): one JSON record with --json, else a line on stderr. */
  const fatal = (exit: number, code: string, message: string, usage = false): number => {
    if (jsonAsked) io.out(JSON.stringify({ type: 'error', code, message, exitCode: exit }));
    else io.err(`tessera encode: ${code === 'ERR_USAGE' ? '' : `${code}: `}${message}${usage ? `\n${ENCODE_USAGE}` : ''}`);
    return exit;
  };
  let parsed: Parsed | 'help';
  try {
    parsed = parse(args);
  } catch (e) {
    return fatal(EXIT_USAGE, 'ERR_USAGE', (e as Error).message, true);
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
    return fatal(EXIT_USAGE, err.code, err.message);
  }
  if (inputs.length === 0)
    return fatal(EXIT_USAGE, 'ERR_USAGE', `no images found in ${o.args.join(', ')}${o.bulk.exclude.length ? ` (after --exclude ${o.bulk.exclude.join(', ')})` : ''}`);

  let modelPath = o.model;
  const demo = modelPath === undefined;
  let tower: VisionTower;
  try {
    if (demo) {
      if (!o.json) io.err(DEMO_NOTICE);
      modelPath = await demoTowerPath();
    }
    tower = await VisionTower.open(modelPath!, o.open);
  } catch (e) {
    const err = toTesseraError(e);
    return fatal(EXIT_USAGE, err.code, `cannot open model ${modelPath ?? '(demo)'}: ${err.message}`);
  }

  let job: OutputJob | undefined;
  try {
    if (o.bulk.outDir !== undefined) {
      job = outputJob(tower, {
        dir: o.bulk.outDir,
        format: o.bulk.format,
        outputDtype: o.bulk.outputDtype,
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
    const err = toTesseraError(e);
    return fatal(EXIT_USAGE, err.code, err.message, true);
  }

  let writer: SafetensorsWriter | undefined;
  let manifest: Manifest | undefined;
  const bar = new ProgressBar({ ...io, tty: io.tty && !o.json && !o.quiet }, inputs.length);
  const fileWidth = Math.min(60, Math.max(4, ...inputs.slice(0, 1000).map((f) => f.path.length)));
  const cols = (c: string[]) =>
    [c[0]!.padEnd(fileWidth), c[1]!.padStart(11), c[2]!.padStart(12), c[3]!.padStart(7), c[4]!.padStart(9)].join('  ').trimEnd();
  let failed = 0;
  let skipped = 0;
  let redone = 0;
  let encoded = 0;
  const failedInputs: string[] = [];
  const outName = (p: string) => (job ? relative(job.dir, p).split('\\').join('/') : p);

  const json = o.json;
  const quiet = o.quiet;
  // One row (or JSON line) per outcome of the run.
  const show = (o: BulkOutcome) => {
    const { index, input } = o;
    if (o.status === 'failed') {
      const err = o.error;
      bar.above(() => {
        if (json) io.out(JSON.stringify({ type: 'image', index, file: input.path, ok: false, error: { code: err.code, message: err.message } }));
        else {
          if (!quiet) io.out(cols([input.path, 'failed', err.code, '-', '-']));
          io.err(`tessera encode: ${input.path}: ${err.code}: ${err.message}`);
        }
      });
      bar.imageDone(true);
    } else if (o.status === 'skipped') {
      const output = outName(o.output);
      bar.above(() => {
        if (json) io.out(JSON.stringify({ type: 'image', index, file: input.path, ok: true, skipped: true, tokens: o.tokens, output }));
        else if (!quiet) io.out(cols([input.path, 'up to date', '-', String(o.tokens), '-']));
      });
      bar.imageDone(false);
    } else {
      const r = o.result;
      const t = r.timings;
      const output = o.output === undefined ? undefined : outName(o.output);
      const ms = { decode: t.decodeMs, preprocess: t.preprocessMs, encode: t.encodeMs, groupEncode: t.groupEncodeMs ?? t.encodeMs, groupImages: t.groupImages ?? 1 };
      bar.above(() => {
        if (json) {
          io.out(
            JSON.stringify({
              type: 'image', index, file: input.path, ok: true, width: r.decoded?.width ?? null, height: r.decoded?.height ?? null,
              grid: r.grid ? r.grid.map((g) => [g.t, g.h, g.w]) : null, patches: patchesOf(r), tokens: r.tokens,
              embeddingWidth: r.width, ms, ...(output !== undefined ? { output } : {}),
            }),
          );
        } else if (!quiet) {
          const size = r.decoded ? `${r.decoded.width}x${r.decoded.height}` : '?';
          io.out(cols([input.path, size, gridText(r), String(r.tokens), (t.decodeMs + t.preprocessMs + t.encodeMs).toFixed(0)]));
        }
      });
      bar.imageDone(true);
    }
  };
  try {
    if (job) {
      const opened = await openOutputDir(job.dir, { removeStale: true });
      manifest = opened.manifest;
      if (opened.removed && !o.json && !o.quiet) io.err(`tessera encode: removed ${opened.removed} temporary file${opened.removed === 1 ? '' : 's'} left in ${job.dir} by an interrupted run`);
    } else if (o.bulk.out) writer = await SafetensorsWriter.create(o.bulk.out);
    if (!o.json && !o.quiet) {
      io.out(`model: ${modelPath}${demo ? ' (demo tower, RANDOM weights)' : ''} — ${tower.info.family}, ${tower.info.depth} blocks, ` +
        `hidden ${tower.info.hidden}, output width ${tower.info.outHidden}, backend ${tower.info.backend}, residency ${tower.info.residency}`);
      io.out(cols(['file', 'size', 'grid', 'tokens', 'ms']));
    }

    disableDecodeCache();
    const reclaimer = new MemoryReclaimer();
    const outcomes = runBulk(tower, inputs, {
      ...(job ? { outputs: job } : {}),
      ...(manifest ? { manifest } : {}),
      force: o.bulk.force,
      encode: {
        ...o.encode,
        batch: o.batch,
        ...(io.signal ? { signal: io.signal } : {}),
        ...(bar.enabled ? { onProgress: (p) => bar.block(p.block, p.blocks) } : {}),
      },
    });
    for await (const outcome of outcomes) {
      // A write the system refuses (ERR_IO: a full disk, a read-only folder) ends the run: the next
      // would fail too. A target that can never be written (ERR_INVALID_ARGUMENT: a name over the
      // filesystem's limit, a FIFO or link in its place) fails its image alone, like a bad image.
      if (outcome.status === 'failed' && outcome.during === 'write' && outcome.error.code !== 'ERR_INVALID_ARGUMENT') throw outcome.error;
      if (outcome.status === 'failed') {
        failed++;
        failedInputs.push(outcome.input.path);
      } else if (outcome.status === 'skipped') skipped++;
      else {
        if (writer) await addToRunFile(writer, outcome.index, outcome.result, o.bulk.outputDtype);
        encoded++;
        if (outcome.redone !== undefined) {
          redone++;
          if (!o.json) bar.above(() => io.err(`tessera encode: ${outcome.input.path}: its output was damaged (${outcome.redone}): redone`));
        }
      }
      show(outcome);
      if (outcome.status === 'encoded') reclaimer.afterImage();
    }
    bar.clear();
    await manifest?.compact(inputs.map((i) => i.path));
    if (writer) {
      await writer.finish({
        inputs: JSON.stringify(inputs.map((i) => i.path)),
        model: modelPath!,
        family: tower.info.family,
        output_dtype: o.bulk.outputDtype,
        tessera_version: tesseraVersion(),
        demo_random_weights: String(demo),
        failed: JSON.stringify(failedInputs),
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
      // The JSON stream ends as every run's does, with its summary record (interrupted, the counts so far).
      if (o.json)
        io.out(JSON.stringify({ type: 'summary', interrupted: true, images: inputs.length, encoded, skipped, failed, notDone: inputs.length - encoded - skipped - failed,
          seconds: (performance.now() - started) / 1000, model: modelPath, family: tower.info.family, demo, out: job ? job.dir : null, format: job?.format ?? (o.bulk.out ? 'safetensors' : null) }));
      else io.err(`tessera encode: interrupted; ${summaryText({ images: inputs.length, encoded, skipped, failed })}${kept}`);
      return EXIT_INTERRUPTED;
    }
    return fatal(err.code === 'ERR_INVALID_ARGUMENT' ? EXIT_USAGE : EXIT_SOME_FAILED, err.code, err.message);
  }
  await tower.close();
  const seconds = (performance.now() - started) / 1000;
  const peak = process.resourceUsage().maxRSS * 1024;
  const out = job ? job.dir : o.bulk.out;
  if (o.json) {
    io.out(JSON.stringify({ type: 'summary', images: inputs.length, encoded, skipped, redone, failed, seconds, imagesPerSecond: encoded / seconds,
      peakRssBytes: peak, model: modelPath, family: tower.info.family, demo, out: out ?? null, format: job?.format ?? (o.bulk.out ? 'safetensors' : null) }));
  } else {
    io.out(`${summaryText({ images: inputs.length, encoded, skipped, failed, redone })} in ${seconds.toFixed(2)} s ` +
      `(${(encoded / seconds).toFixed(2)} images/s); peak memory ${formatBytes(peak)}${out ? `; wrote ${out}` : ''}`);
    if (demo && !o.quiet) io.out(`(demo tower: ${basename(modelPath!)} has RANDOM weights)`);
  }
  return failed ? EXIT_SOME_FAILED : EXIT_OK;
}
