// `tessera encode <image...>` (docs/design.md#command-line): one row per image (file, size, grid, tokens, ms), a
// progress bar on a TTY, a summary; --json prints JSON Lines instead; --out writes one safetensors
// file. Exit 0 when every input was encoded, 1 when some failed (each named with its code; the
// others are still written), 2 for usage or model errors; 130 when interrupted (SIGINT/SIGTERM:
// the encode stops between blocks and the partial --out file is removed).
import { basename } from 'node:path';
import { parseArgs } from 'node:util';
import { TesseraError, toTesseraError } from '../errors.js';
import { checkSoftTokenBudget } from '../image/index.js';
import { OpenOptionsSchema, encodeOptionsSchema, parseArgument } from '../options.js';
import { VisionTower, type EncodeOptions, type EncodeResult, type OpenOptions } from '../tower.js';
import { DEMO_NOTICE, demoTowerPath, tesseraVersion } from './demo.js';
import { EXIT_INTERRUPTED, EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, formatBytes, type CliIo } from './io.js';
import { ProgressBar } from './progress.js';
import { SafetensorsWriter } from './safetensors-writer.js';

export const ENCODE_USAGE = `usage: tessera encode <image...> [--model <path>] [--out file.safetensors] [--backend auto|cpu|metal|metal-emulated]
                      [--residency auto|stream|mapped|resident] [--min-pixels N] [--max-pixels N]
                      [--max-soft-tokens 70|140|280|560|1120] [--batch N] [--stages] [--json]
Without --model, a small demo tower with random weights is used.`;

class UsageError extends Error {}

function positiveInt(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n <= 0) throw new UsageError(`--${name} must be a positive integer (got '${v}')`);
  return n;
}

interface Parsed {
  images: string[];
  model: string | undefined;
  out: string | undefined;
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
      backend: { type: 'string' },
      residency: { type: 'string' },
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
  const open: OpenOptions = {};
  if (values.backend) open.backend = values.backend as OpenOptions['backend'];
  if (values.residency) open.residency = values.residency as OpenOptions['residency'];
  // The library's own schemas (both families' keys: the model is not open yet), so that a flag
  // the API would refuse (--min-pixels above --max-pixels) is a usage error before any work.
  try {
    parseArgument(OpenOptionsSchema, open, 'options');
    parseArgument(encodeOptionsSchema(), encode, 'options');
  } catch (e) {
    throw new UsageError((e as Error).message.replace(/option '(\w+)'/, (_, k: string) => `--${k.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())}`));
  }
  return {
    images: positionals,
    model: values.model,
    out: values.out,
    open,
    encode,
    batch: positiveInt('batch', values.batch) ?? 4,
    json: values.json ?? false,
  };
}

function patchesOf(r: EncodeResult): number {
  if (r.grid) return r.grid.reduce((a, g) => a + g.t * g.h * g.w, 0);
  return (r.positions?.length ?? 0) / 2;
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

/** Shape of a stage output: patch-row stages (embed, block.N) by patches, the rest by tokens. */
function stageShape(name: string, values: Float32Array, patches: number, tokens: number): number[] {
  const rows = name === 'embed' || name.startsWith('block.') ? patches : tokens;
  return rows > 0 && values.length % rows === 0 ? [rows, values.length / rows] : [values.length];
}

async function writeResult(w: SafetensorsWriter, i: number, r: EncodeResult): Promise<void> {
  const p = `image.${i}.`;
  const patches = patchesOf(r);
  await w.add(p + 'embeddings', [r.tokens, r.width], r.embeddings);
  if (r.grid) await w.add(p + 'grid_thw', [r.grid.length, 3], BigInt64Array.from(r.grid.flatMap((g) => [g.t, g.h, g.w]), (v) => BigInt(v)));
  if (r.positions) await w.add(p + 'positions', [r.positions.length / 2, 2], BigInt64Array.from(r.positions, (v) => BigInt(v)));
  for (const [k, d] of (r.deepstack ?? []).entries()) await w.add(`${p}deepstack.${k}`, [r.tokens, d.length / r.tokens], d);
  for (const [name, d] of Object.entries(r.stages ?? {})) await w.add(`${p}stage.${name}`, stageShape(name, d, patches, r.tokens), d);
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

  let writer: SafetensorsWriter | undefined;
  const bar = new ProgressBar({ ...io, tty: io.tty && !o.json }, o.images.length);
  const fileWidth = Math.min(60, Math.max(4, ...o.images.map((f) => f.length)));
  const cols = (c: string[]) =>
    [c[0]!.padEnd(fileWidth), c[1]!.padStart(11), c[2]!.padStart(12), c[3]!.padStart(7), c[4]!.padStart(9)].join('  ').trimEnd();
  const failedInputs: number[] = [];
  try {
    if (o.out) writer = await SafetensorsWriter.create(o.out);
    if (!o.json) {
      io.out(`model: ${modelPath}${demo ? ' (demo tower, RANDOM weights)' : ''} — ${tower.info.family}, ${tower.info.depth} blocks, ` +
        `hidden ${tower.info.hidden}, output width ${tower.info.outHidden}, backend ${tower.info.backend}, residency ${tower.info.residency}`);
      io.out(cols(['file', 'size', 'grid', 'tokens', 'ms']));
    }
    for (let start = 0; start < o.images.length; start += o.batch) {
      const chunk = o.images.slice(start, start + o.batch);
      const results = await tower.encodeBatch(chunk, {
        ...o.encode,
        ...(io.signal ? { signal: io.signal } : {}),
        onProgress: bar.enabled ? (p) => bar.block(p.block, p.blocks) : undefined,
      });
      for (const [k, r] of results.entries()) {
        const i = start + k;
        const file = o.images[i]!;
        if (r instanceof TesseraError || !r) {
          failedInputs.push(i);
          const err = r ?? new TesseraError('ERR_INTERNAL', 'no result');
          bar.above(() => {
            if (o.json) io.out(JSON.stringify({ type: 'image', index: i, file, ok: false, error: { code: err.code, message: err.message } }));
            else {
              io.out(cols([file, 'failed', err.code, '-', '-']));
              io.err(`tessera encode: ${file}: ${err.code}: ${err.message}`);
            }
          });
          continue;
        }
        if (writer) await writeResult(writer, i, r);
        const ms = r.timings.decodeMs + r.timings.preprocessMs + r.timings.encodeMs;
        const size = r.decoded ? `${r.decoded.width}x${r.decoded.height}` : '?';
        bar.above(() => {
          if (o.json) {
            io.out(
              JSON.stringify({
                type: 'image', index: i, file, ok: true, width: r.decoded?.width ?? null, height: r.decoded?.height ?? null,
                grid: r.grid ? r.grid.map((g) => [g.t, g.h, g.w]) : null, patches: patchesOf(r), tokens: r.tokens,
                embeddingWidth: r.width, ms: { decode: r.timings.decodeMs, preprocess: r.timings.preprocessMs, encode: r.timings.encodeMs },
              }),
            );
          } else io.out(cols([file, size, gridText(r), String(r.tokens), ms.toFixed(0)]));
        });
      }
      bar.imagesDone(Math.min(o.images.length, start + chunk.length));
    }
    bar.clear();
    if (writer) {
      await writer.finish({
        inputs: JSON.stringify(o.images),
        model: modelPath!,
        family: tower.info.family,
        tessera_version: tesseraVersion(),
        demo_random_weights: String(demo),
        failed: JSON.stringify(failedInputs),
      });
    }
  } catch (e) {
    bar.clear();
    await writer?.abort();
    const err = toTesseraError(e);
    await tower.close();
    if (err.code === 'ERR_ABORTED') {
      io.err(`tessera encode: interrupted${o.out ? `; ${o.out} not written` : ''}`);
      return EXIT_INTERRUPTED;
    }
    io.err(`tessera encode: ${err.code}: ${err.message}`);
    return err.code === 'ERR_INVALID_ARGUMENT' ? EXIT_USAGE : EXIT_SOME_FAILED;
  }
  await tower.close();
  const seconds = (performance.now() - started) / 1000;
  const failed = failedInputs.length;
  const encoded = o.images.length - failed;
  const peak = process.resourceUsage().maxRSS * 1024;
  if (o.json) {
    io.out(JSON.stringify({ type: 'summary', images: o.images.length, encoded, failed, seconds, imagesPerSecond: encoded / seconds,
      peakRssBytes: peak, model: modelPath, family: tower.info.family, demo, out: o.out ?? null }));
  } else {
    io.out(`encoded ${encoded} of ${o.images.length} image${o.images.length === 1 ? '' : 's'} in ${seconds.toFixed(2)} s ` +
      `(${(encoded / seconds).toFixed(2)} images/s); peak memory ${formatBytes(peak)}${o.out ? `; wrote ${o.out}` : ''}`);
    if (demo) io.out(`(demo tower: ${basename(modelPath!)} has RANDOM weights)`);
  }
  return failed ? EXIT_SOME_FAILED : EXIT_OK;
}
