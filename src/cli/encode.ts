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
import { BulkOutputOptionsSchema, DEFAULT_BATCH, OpenOptionsSchema, encodeManyOptionsSchema, parseArgument, type BulkOutputOptions } from '../options.js';
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
}

function parse(args: readonly string[]): Parsed | 'help' {
  const { help, positionals, groups } = parseFlags(ENCODE, args);
  if (help) return 'help';
  if (positionals.length === 0) throw new UsageError('no images given');
  const { batch = DEFAULT_BATCH, ...encode } = groups['encode'] ?? {};
  // The same schemas as the API's: encodeMany's options (family-free: the model is not open yet), the bulk flags, open's.
  flagged(() => parseArgument(encodeManyOptionsSchema(), { ...encode, batch }, 'tessera encode'));
  const bulk = flagged(() => parseArgument(BulkOutputOptionsSchema, groups['bulk'] ?? {}, 'tessera encode'));
  const open = flagged(() => parseArgument(OpenOptionsSchema, groups['open'] ?? {}, 'tessera encode'));
  const cli = groups['cli'] ?? {};
  return {
    args: positionals,
    model: cli['model'] as string | undefined,
    bulk,
    open,
    encode: { stages: false, ...(encode as EncodeOptions) },
    batch: batch as number,
    json: Boolean(cli['json']),
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
async function addToRunFile(w: SafetensorsWriter, i: number, r: EncodeResult): Promise<void> {
  for (const t of resultTensors(r)) await w.add(`image.${i}.${t.name}`, t.shape, t.data);
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
  let redone = 0;
  let encoded = 0;
  const failedInputs: number[] = [];
  const outName = (p: string) => (job ? relative(job.dir, p).split('\\').join('/') : p);

  const json = o.json;
  // One row (or JSON line) per outcome of the run.
  const show = (o: BulkOutcome) => {
    const { index, input } = o;
    if (o.status === 'failed') {
      const err = o.error;
      bar.above(() => {
        if (json) io.out(JSON.stringify({ type: 'image', index, file: input.path, ok: false, error: { code: err.code, message: err.message } }));
        else {
          io.out(cols([input.path, 'failed', err.code, '-', '-']));
          io.err(`tessera encode: ${input.path}: ${err.code}: ${err.message}`);
        }
      });
      bar.imageDone(true);
    } else if (o.status === 'skipped') {
      const output = outName(o.output);
      bar.above(() => {
        if (json) io.out(JSON.stringify({ type: 'image', index, file: input.path, ok: true, skipped: true, tokens: o.tokens, output }));
        else io.out(cols([input.path, 'up to date', '-', String(o.tokens), '-']));
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
        } else {
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
      if (opened.removed && !o.json) io.err(`tessera encode: removed ${opened.removed} temporary file${opened.removed === 1 ? '' : 's'} left in ${job.dir} by an interrupted run`);
    } else if (o.bulk.out) writer = await SafetensorsWriter.create(o.bulk.out);
    if (!o.json) {
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
        failedInputs.push(outcome.index);
      } else if (outcome.status === 'skipped') skipped++;
      else {
        if (writer) await addToRunFile(writer, outcome.index, outcome.result);
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
    io.out(JSON.stringify({ type: 'summary', images: inputs.length, encoded, skipped, redone, failed, seconds, imagesPerSecond: encoded / seconds,
      peakRssBytes: peak, model: modelPath, family: tower.info.family, demo, out: out ?? null, format: job?.format ?? (o.bulk.out ? 'safetensors' : null) }));
  } else {
    io.out(`encoded ${encoded} of ${inputs.length} image${inputs.length === 1 ? '' : 's'}${skipped ? ` (${skipped} up to date, skipped)` : ''}${redone ? ` (${redone} damaged output${redone === 1 ? '' : 's'} redone)` : ''} in ${seconds.toFixed(2)} s ` +
      `(${(encoded / seconds).toFixed(2)} images/s); peak memory ${formatBytes(peak)}${out ? `; wrote ${out}` : ''}`);
    if (demo) io.out(`(demo tower: ${basename(modelPath!)} has RANDOM weights)`);
  }
  return failed ? EXIT_SOME_FAILED : EXIT_OK;
}
