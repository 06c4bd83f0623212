// --out-dir DIR: one output per image at DIR/<its path relative to its input root, extension
// replaced>, each file written to a temporary file beside it, fsync'ed and renamed (atomic-file.ts),
// so a file is whole or absent. This module is the one writer of those outputs: `tessera encode
// --out-dir` and any other worker that encodes images (the fleet) call writeImageOutputs and
// findUpToDate (through the one job runner, runner.ts), so their files are the same byte for byte.
//
// Per format (stem = DIR/<rel without extension>):
//   safetensors  stem.safetensors                (tensors of src/outputs/tensors.ts; __metadata__ = the record)
//   npy          stem.<tensor>.npy per tensor    + stem.tessera.json (the record, written last)
//   vllm         stem.vllm.json                  + stem.tessera.json   (tensors as base64 .npy)
//   vllm-torch   stem.vllm.json                  + stem.tessera.json   (tensors as base64 torch.save)
//   vllm-encoder-cache  DIR/<sha256 of the input>/encoder_cache.safetensors + stem.tessera.json
//                (vLLM's encoder-cache storage; the record names the identifier; inputs are hashed)
//   sglang       stem.sglang.json                + stem.tessera.json
// The record says what the output was made from: the model, the options, the format, the input's
// size and mtime (and SHA-256 with hashInputs). A rerun skips an image whose record matches
// (findUpToDate) and redoes one whose record differs or is missing.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { TesseraError } from '../errors.js';
import { ioError } from '../io/io-error.js';
import type { Family } from '../spec/types.js';
import type { EncodeOptions, EncodeResult, VisionTower } from '../tower.js';
import { temporaryFileOwner, writeFileAtomic } from '../io/atomic-file.js';
import { npyBytes } from '../outputs/npy.js';
import { readSafetensorsMetadata, safetensorsBytes } from '../formats/safetensors.js';
import { toSglangItemJson } from '../outputs/sglang.js';
import { resultTensors } from '../outputs/tensors.js';
import { toVllmContentPart, vllmUnsupported } from '../outputs/vllm.js';
import { ENCODER_CACHE_FILE, encoderCacheBytes, encoderCacheIdentifier } from '../outputs/vllm-encoder-cache.js';
import type { BulkInput } from './inputs.js';

import { OUTPUT_FORMATS, type Precision } from '../options.js';

export { OUTPUT_FORMATS };
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Version of the output layout and record; a different version is redone. */
export const OUTPUT_LAYOUT_VERSION = '1';

/** What every output of one run is made with (see outputJob). */
export interface OutputJob {
  dir: string;
  format: OutputFormat;
  /** The model as given, and what identifies its weights (family, sizes, dtype, file bytes). */
  model: string;
  modelSignature: string;
  family: Family;
  /** The options that change the output (sizing, admission, stages), keys sorted. */
  options: Record<string, number | boolean>;
  /** tower.info.precision: what the linears ran in (outputs of f32 and bf16 runs are never mixed). */
  precision: Precision;
  /** Also fingerprint each input by its SHA-256 (not only size and mtime). */
  hashInputs: boolean;
  /** Extra strings for the record (tessera's version, demo_random_weights); not compared. */
  notes: Record<string, string>;
}

/** The options of EncodeOptions that change what is written; the others (signal, onProgress) do not. */
const OUTPUT_OPTIONS = ['minPixels', 'maxPixels', 'maxSoftTokens', 'maxInputPixels', 'stages', 'checkFinite'] as const;

/**
 * The defaults of those options (EncodeOptions): an option given as its default is recorded as
 * absent, so `{ stages: false }` and `{}` make the same record whoever the caller is.
 */
const OUTPUT_OPTION_DEFAULTS: Partial<Record<(typeof OUTPUT_OPTIONS)[number], number | boolean>> = { stages: false, checkFinite: true };

/** The job for a run of `tower` with these encode options. Refuses a format the family cannot take. */
export function outputJob(
  tower: VisionTower,
  o: { dir: string; format: OutputFormat; model: string; options: EncodeOptions; hashInputs?: boolean; notes?: Record<string, string> },
): OutputJob {
  if (!(OUTPUT_FORMATS as readonly string[]).includes(o.format))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `output format must be one of ${OUTPUT_FORMATS.join(', ')} (got '${o.format}')`);
  const why = o.format.startsWith('vllm') ? vllmUnsupported(tower.info.family) : undefined;
  if (why) throw new TesseraError('ERR_INVALID_ARGUMENT', `--format ${o.format}: ${why}`);
  const i = tower.info;
  const options: Record<string, number | boolean> = {};
  for (const k of OUTPUT_OPTIONS) if (o.options[k] !== undefined && o.options[k] !== OUTPUT_OPTION_DEFAULTS[k]) options[k] = o.options[k] as number | boolean;
  return {
    dir: o.dir,
    format: o.format,
    model: o.model,
    modelSignature: `${i.family} depth ${i.depth} hidden ${i.hidden} out ${i.outHidden} ${i.dtype} ${i.memory.fileBytes} bytes`,
    family: i.family,
    options,
    precision: i.precision,
    // vllm-encoder-cache names each image's folder by the SHA-256 of its bytes.
    hashInputs: (o.hashInputs ?? false) || o.format === 'vllm-encoder-cache',
    notes: o.notes ?? {},
  };
}

/** What an input was when it was read: compared on rerun. */
export interface InputStamp {
  size: number;
  mtimeMs: number;
  sha256?: string;
}

export async function stampInput(path: string, hash: boolean): Promise<InputStamp> {
  let st;
  try {
    st = await stat(path);
  } catch (e) {
    throw ioError(path, 'cannot read', e);
  }
  // Only regular files are read (a FIFO would block the hash; io/open-regular.ts refuses the rest).
  if (!st.isFile()) throw new TesseraError('ERR_IO', `${path} is not a regular file`);
  const stamp: InputStamp = { size: st.size, mtimeMs: st.mtimeMs };
  if (hash) {
    const h = createHash('sha256');
    try {
      for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
    } catch (e) {
      throw ioError(path, 'cannot read', e);
    }
    stamp.sha256 = h.digest('hex');
  }
  return stamp;
}

/** The stamp of an input read as bytes (a fetched URL): its size and SHA-256; it has no mtime. */
export function stampOfBytes(bytes: Uint8Array): InputStamp {
  return { size: bytes.byteLength, mtimeMs: 0, sha256: createHash('sha256').update(bytes).digest('hex') };
}

/** The compared part of a record, as one string. */
function fingerprint(job: OutputJob, input: BulkInput, stamp: InputStamp): string {
  return JSON.stringify({
    layout: OUTPUT_LAYOUT_VERSION,
    model: job.model,
    modelSignature: job.modelSignature,
    format: job.format,
    options: job.options,
    // f32 is recorded as absent: records written before precision existed (all f32) stay up to date
    ...(job.precision !== 'f32' ? { precision: job.precision } : {}),
    input: input.rel,
    size: stamp.size,
    mtimeMs: stamp.mtimeMs,
    ...(job.hashInputs ? { sha256: stamp.sha256 } : {}),
  });
}

/** The record of one output, as strings (safetensors __metadata__ takes strings only). */
function record(job: OutputJob, input: BulkInput, stamp: InputStamp, r: EncodeResult): Record<string, string> {
  return {
    tessera_output: fingerprint(job, input, stamp),
    input: input.rel,
    model: job.model,
    family: job.family,
    format: job.format,
    options: JSON.stringify(job.options),
    input_size: String(stamp.size),
    input_mtime_ms: String(stamp.mtimeMs),
    ...(stamp.sha256 ? { input_sha256: stamp.sha256 } : {}),
    tokens: String(r.tokens),
    width: String(r.width),
    ...job.notes,
  };
}

/** The record's fields that are numbers, and those that are JSON (options): typed in .tessera.json. */
const NUMBER_FIELDS = ['input_size', 'input_mtime_ms', 'tokens', 'width'];
const JSON_FIELDS = ['options'];

/** The record as .tessera.json holds it: numbers as numbers and the options as an object (only safetensors' __metadata__ needs strings). */
function typedRecord(meta: Record<string, string>): Record<string, unknown> {
  const typed: Record<string, unknown> = { ...meta };
  for (const k of NUMBER_FIELDS) if (meta[k] !== undefined) typed[k] = Number(meta[k]);
  for (const k of JSON_FIELDS) if (meta[k] !== undefined) typed[k] = JSON.parse(meta[k]) as unknown;
  return typed;
}

/** A record read from .tessera.json, back in the strings every record is compared and returned as. */
function stringRecord(typed: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(typed).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
}

function stemOf(job: Pick<OutputJob, 'dir'>, input: BulkInput): string {
  const rel = input.rel.split('/');
  const name = rel.pop()!;
  const dot = name.lastIndexOf('.');
  return join(job.dir, ...rel, dot > 0 ? name.slice(0, dot) : name);
}

/** The file that holds an image's record: the output itself (safetensors) or stem.tessera.json. */
export function recordPath(job: OutputJob, input: BulkInput): string {
  const stem = stemOf(job, input);
  return job.format === 'safetensors' ? stem + '.safetensors' : stem + '.tessera.json';
}

/** The main output file of an image (what the manifest names). */
export function primaryOutput(job: OutputJob, input: BulkInput): string {
  const stem = stemOf(job, input);
  switch (job.format) {
    case 'safetensors':
      return stem + '.safetensors';
    case 'npy':
      return stem + '.embeddings.npy';
    case 'vllm':
    case 'vllm-torch':
      return stem + '.vllm.json';
    case 'vllm-encoder-cache':
      // The cache file's folder is the input's digest, known once it is read: the record names it.
      return stem + '.tessera.json';
    case 'sglang':
      return stem + '.sglang.json';
  }
}

/**
 * Refuses inputs whose outputs would land on the same files (page.png and page.jpg in one folder),
 * naming both, before any work. Only the folder matters (`tessera enqueue` checks with no folder:
 * the names relative to whichever out-dir its workers write).
 */
export function checkDistinctOutputs(job: Pick<OutputJob, 'dir'>, inputs: readonly BulkInput[]): void {
  const seen = new Map<string, string>();
  for (const input of inputs) {
    const key = stemOf(job, input);
    const other = seen.get(key);
    if (other !== undefined)
      throw new TesseraError('ERR_INVALID_ARGUMENT', `${other} and ${input.path} would both be written as ${relative(job.dir, key) || key}.*: exclude one or rename it`);
    seen.set(key, input.path);
  }
}

/** An image's outputs found up to date: their record, and every file of them, the record's last. */
export interface UpToDateOutput {
  record: Record<string, string>;
  primary: string;
  files: string[];
  tokens: number;
  width: number;
}

async function readRecord(job: OutputJob, input: BulkInput): Promise<{ record: Record<string, string>; files: string[] } | undefined> {
  const path = recordPath(job, input);
  if (job.format === 'safetensors') {
    const meta = await readSafetensorsMetadata(path);
    return meta ? { record: meta, files: [path] } : undefined;
  }
  try {
    const r = JSON.parse(await readFile(path, 'utf8')) as { record?: Record<string, unknown>; files?: string[] };
    if (!r.record || !Array.isArray(r.files)) return undefined;
    return { record: stringRecord(r.record), files: [...r.files.map((f) => join(dirname(path), f)), path] };
  } catch {
    return undefined;
  }
}

/**
 * The one up-to-date check: the image's outputs when every file of them exists and their record
 * matches this job and this input (the image can be skipped), else undefined.
 */
export async function findUpToDate(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<UpToDateOutput | undefined> {
  const found = await readRecord(job, input);
  if (!found || found.record['tessera_output'] !== fingerprint(job, input, stamp)) return undefined;
  for (const f of found.files) if (!(await stat(f).then((s) => s.isFile(), () => false))) return undefined;
  const { record, files } = found;
  return { record, files, primary: primaryOutput(job, input), tokens: Number(record['tokens']), width: Number(record['width']) };
}

/** The record of the image's outputs when they are up to date (findUpToDate), else undefined. */
export async function upToDateRecord(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<Record<string, string> | undefined> {
  return (await findUpToDate(job, input, stamp))?.record;
}

/** True when the image's outputs are up to date (findUpToDate). */
export async function isUpToDate(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<boolean> {
  return (await findUpToDate(job, input, stamp)) !== undefined;
}

export interface WrittenOutput {
  /** The main file (the manifest's `output`) and every file written, the record last. */
  primary: string;
  files: string[];
}

/**
 * Writes one image's outputs as `tessera encode --out-dir` does: each file atomically, the record
 * last (for the sidecar formats an old record is removed first, so an interrupted rewrite is
 * never taken for a finished one). `stamp` is the input as it was read (stampInput before the
 * encode). Failures are TesseraErrors (ERR_IO naming the file).
 */
export async function writeImageOutputs(job: OutputJob, input: BulkInput, result: EncodeResult, stamp: InputStamp): Promise<WrittenOutput> {
  const stem = stemOf(job, input);
  const dir = dirname(stem);
  try {
    await mkdir(dir, { recursive: true });
  } catch (e) {
    throw ioError(dir, 'cannot create folder', e);
  }
  const meta = record(job, input, stamp, result);
  if (job.format === 'safetensors') {
    const path = stem + '.safetensors';
    await writeFileAtomic(path, safetensorsBytes(resultTensors(result), meta));
    return { primary: path, files: [path] };
  }
  const recordFile = stem + '.tessera.json';
  await unlink(recordFile).catch(() => undefined);
  const files: string[] = [];
  if (job.format === 'npy') {
    for (const t of resultTensors(result)) {
      const path = `${stem}.${t.name}.npy`;
      await writeFileAtomic(path, npyBytes(t));
      files.push(path);
    }
  } else if (job.format === 'vllm' || job.format === 'vllm-torch') {
    const path = stem + '.vllm.json';
    const encoding = job.format === 'vllm' ? 'npy' : 'torch';
    await writeFileAtomic(path, JSON.stringify(toVllmContentPart(result, job.family, { encoding })));
    files.push(path);
  } else if (job.format === 'vllm-encoder-cache') {
    const identifier = encoderCacheIdentifier(stamp.sha256, input.path);
    meta['identifier'] = identifier;
    const folder = join(job.dir, identifier);
    try {
      await mkdir(folder, { recursive: true });
    } catch (e) {
      throw ioError(folder, 'cannot create folder', e);
    }
    const path = join(folder, ENCODER_CACHE_FILE);
    await writeFileAtomic(path, encoderCacheBytes(result, meta));
    files.push(path);
  } else {
    const path = stem + '.sglang.json';
    await writeFileAtomic(path, toSglangItemJson(result));
    files.push(path);
  }
  const names = files.map((f) => relative(dir, f).split(sep).join('/'));
  await writeFileAtomic(recordFile, JSON.stringify({ record: typedRecord(meta), files: names }, null, 1) + '\n');
  return { primary: primaryOutput(job, input), files: [...files, recordFile] };
}

/**
 * Removes the temporary files that killed runs left under `dir` (their process is gone); a live
 * process's files are left alone. Returns how many were removed.
 */
export async function removeStaleTemporaries(dir: string): Promise<number> {
  let removed = 0;
  const alive = (pid: number) => {
    if (pid === process.pid) return true;
    try {
      process.kill(pid, 0);
      return true;
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
  const visit = async (d: string) => {
    const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      if (e.isDirectory()) await visit(join(d, e.name));
      else {
        const pid = temporaryFileOwner(e.name);
        if (pid !== undefined && !alive(pid)) await unlink(join(d, e.name)).then(() => removed++, () => undefined);
      }
    }
  };
  await visit(dir);
  return removed;
}
