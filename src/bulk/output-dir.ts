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
// Float tensors are written in the job's output dtype (f32, bf16 or f16; src/outputs/out-dtype.ts).
// The record says what the output was made from: the model, the options, the format, the output dtype, the input's
// size and mtime (and SHA-256 with hashInputs), and what was written: each file's byte size and the
// SHA-256 of its bytes (safetensors: of its data section, since the record sits in its header). A
// rerun skips an image whose record matches and whose files are still those bytes (checkOutputs:
// sizes by fstat, checksums by reading each file back in chunks); it redoes one whose record differs
// or is missing, and one whose files are damaged (reported as redone). Records of layout 1 (before
// sizes and checksums were kept) are redone once. Records, outputs and the manifest are read back
// with O_NOFOLLOW | O_NONBLOCK (io/read-back.ts): a link or FIFO in their place is never trusted.
// With guardInputs (the fleet), an output whose record names another input is never replaced.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, stat, unlink } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { TesseraError } from '../errors.js';
import { ioError } from '../io/io-error.js';
import type { Family } from '../spec/types.js';
import type { EncodeOptions, EncodeResult, VisionTower } from '../tower.js';
import { checkOutputTarget, temporaryFileOwner, writeError, writeFileAtomic } from '../io/atomic-file.js';
import { openOwnFile, readOwnFile, sha256OfRange } from '../io/read-back.js';
import { npyBytes } from '../outputs/npy.js';
import { readSafetensorsOutputHeader, safetensorsBytes } from '../formats/safetensors.js';
import { toSglangItemJson } from '../outputs/sglang.js';
import { resultTensors } from '../outputs/tensors.js';
import { toVllmContentPart, vllmUnsupported } from '../outputs/vllm.js';
import { ENCODER_CACHE_FILE, encoderCacheBytes, encoderCacheIdentifier } from '../outputs/vllm-encoder-cache.js';
import type { BulkInput } from './inputs.js';

import { OUTPUT_DTYPES, OUTPUT_FORMATS, outputDtypeUnsupported, type OutputDtype, type OutputFormat, type Precision } from '../options.js';

export { OUTPUT_DTYPES, OUTPUT_FORMATS, type OutputDtype, type OutputFormat };

/** Version of the output layout and record; a different version is redone. */
export const OUTPUT_LAYOUT_VERSION = '2';

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
  /** What the float tensors are written in (--out-dtype; src/outputs/out-dtype.ts). */
  outputDtype: OutputDtype;
  /** Also fingerprint each input by its SHA-256 (not only size and mtime). */
  hashInputs: boolean;
  /** Extra strings for the record (tessera's version, demo_random_weights); not compared. */
  notes: Record<string, string>;
  /**
   * Never replace an output whose record names another input (its rel or its source path): set by
   * the fleet, whose jobs come from many callers; `tessera encode` refuses colliding inputs up front
   * (checkDistinctOutputs) and lets a later run replace what an earlier one wrote.
   */
  guardInputs?: boolean;
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
  o: { dir: string; format: OutputFormat; outputDtype?: OutputDtype; model: string; options: EncodeOptions; hashInputs?: boolean; notes?: Record<string, string> },
): OutputJob {
  if (!(OUTPUT_FORMATS as readonly string[]).includes(o.format))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `output format must be one of ${OUTPUT_FORMATS.join(', ')} (got '${o.format}')`);
  const outputDtype = o.outputDtype ?? 'f32';
  if (!(OUTPUT_DTYPES as readonly string[]).includes(outputDtype))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `output dtype must be one of ${OUTPUT_DTYPES.join(', ')} (got '${String(outputDtype)}')`);
  const unfit = outputDtypeUnsupported(o.format, outputDtype);
  if (unfit) throw new TesseraError('ERR_INVALID_ARGUMENT', `--format ${o.format} --out-dtype ${outputDtype}: ${unfit}`);
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
    outputDtype,
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
    // likewise: outputs written before the output dtype existed are f32
    ...(job.outputDtype !== 'f32' ? { outputDtype: job.outputDtype } : {}),
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
    output_dtype: job.outputDtype,
    options: JSON.stringify(job.options),
    input_size: String(stamp.size),
    input_mtime_ms: String(stamp.mtimeMs),
    ...(stamp.sha256 ? { input_sha256: stamp.sha256 } : {}),
    source: input.path,
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

/** Records are a few KiB; a bound keeps a hostile file from filling memory. */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;

/** One file of a sidecar record: its name beside the record, its byte size and the SHA-256 of its bytes. */
interface RecordedFile {
  name: string;
  bytes: number;
  sha256: string;
}

/** An image's record as found on disk, with what is needed to verify its files. */
type FoundRecord =
  | { format: 'safetensors'; record: Record<string, string>; path: string; dataStart: number }
  | { format: 'sidecar'; record: Record<string, string>; path: string; files: RecordedFile[] };

async function readSafetensorsRecord(path: string): Promise<FoundRecord | undefined> {
  const h = await readSafetensorsOutputHeader(path);
  return h ? { format: 'safetensors', record: h.metadata, path, dataStart: h.dataStart } : undefined;
}

async function readRecord(job: OutputJob, input: BulkInput): Promise<FoundRecord | undefined> {
  const path = recordPath(job, input);
  if (job.format === 'safetensors') return readSafetensorsRecord(path);
  const bytes = await readOwnFile(path, MAX_RECORD_BYTES);
  if (!bytes) return undefined;
  try {
    const r = JSON.parse(bytes.toString('utf8')) as { record?: Record<string, unknown>; files?: unknown[] };
    if (!r.record || typeof r.record !== 'object' || !Array.isArray(r.files)) return undefined;
    const files = r.files.filter(
      (f): f is RecordedFile =>
        typeof f === 'object' && f !== null && typeof (f as RecordedFile).name === 'string' && Number.isSafeInteger((f as RecordedFile).bytes) && typeof (f as RecordedFile).sha256 === 'string',
    );
    return { format: 'sidecar', record: stringRecord(r.record), path, files };
  } catch {
    return undefined;
  }
}

/** Why the file at `path` is not the `bytes` bytes of SHA-256 `sha256` written there (from byte `start`), or undefined when it is. */
async function damageOf(path: string, start: number, bytes: number, sha256: string): Promise<string | undefined> {
  const f = await openOwnFile(path);
  if (!f) return `${path} is missing or not a regular file`;
  try {
    if (f.size !== start + bytes) return `${path} is ${f.size} bytes, its record says ${start + bytes}`;
    if ((await sha256OfRange(f.handle, start, f.size)) !== sha256) return `${path} does not hold the bytes its record names (SHA-256 differs)`;
    return undefined;
  } catch (e) {
    return `${path} cannot be read back (${(e as Error).message})`;
  } finally {
    await f.handle.close().catch(() => undefined);
  }
}

/** What a rerun finds of an image's outputs (checkOutputs). */
export type OutputState =
  /** Record matches and every file is the bytes it names: skip the image. */
  | { state: 'up-to-date'; output: UpToDateOutput }
  /** Record matches but a file is damaged (why says which and how): redo it, and say so. */
  | { state: 'damaged'; why: string }
  /** No record, or one of another job or input state: (re)do it. */
  | { state: 'stale' };

/**
 * The one up-to-date check: the image's outputs are up to date when their record matches this job
 * and this input and every file they list is still the size and SHA-256 the record holds.
 */
export async function checkOutputs(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<OutputState> {
  const found = await readRecord(job, input);
  if (!found || found.record['tessera_output'] !== fingerprint(job, input, stamp)) return { state: 'stale' };
  const { record } = found;
  let files: string[];
  let why: string | undefined;
  if (found.format === 'safetensors') {
    const bytes = Number(record['data_bytes']);
    const sha = record['data_sha256'];
    why = !Number.isSafeInteger(bytes) || !sha ? `${found.path}: its record lacks the data section's size and checksum` : await damageOf(found.path, found.dataStart, bytes, sha);
    files = [found.path];
  } else {
    const dir = dirname(found.path);
    if (!found.files.length) why = `${found.path}: its record lists no files`;
    for (const f of found.files) {
      why ??= await damageOf(join(dir, f.name), 0, f.bytes, f.sha256);
      if (why) break;
    }
    files = [...found.files.map((f) => join(dir, f.name)), found.path];
  }
  if (why) return { state: 'damaged', why };
  return { state: 'up-to-date', output: { record, files, primary: primaryOutput(job, input), tokens: Number(record['tokens']), width: Number(record['width']) } };
}

/** The image's outputs when they are up to date (checkOutputs), else undefined. */
export async function findUpToDate(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<UpToDateOutput | undefined> {
  const s = await checkOutputs(job, input, stamp);
  return s.state === 'up-to-date' ? s.output : undefined;
}

/** The record of the image's outputs when they are up to date (findUpToDate), else undefined. */
export async function upToDateRecord(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<Record<string, string> | undefined> {
  return (await findUpToDate(job, input, stamp))?.record;
}

/** True when the image's outputs are up to date (findUpToDate). */
export async function isUpToDate(job: OutputJob, input: BulkInput, stamp: InputStamp): Promise<boolean> {
  return (await findUpToDate(job, input, stamp)) !== undefined;
}

/**
 * With guardInputs: refuses (ERR_INVALID_ARGUMENT, naming both inputs) to replace outputs whose
 * record names another input, by rel or by source. A record without a source (layout 1) is judged by its rel.
 */
async function checkSlotOwner(job: OutputJob, input: BulkInput): Promise<void> {
  const found = await readRecord(job, input);
  if (!found) return;
  const rel = found.record['input'];
  const source = found.record['source'];
  if (rel === input.rel && (source === undefined || source === input.path)) return;
  const other = source ?? rel ?? 'another input';
  throw new TesseraError(
    'ERR_INVALID_ARGUMENT',
    `${input.path} (as ${input.rel}) and ${other}${rel && rel !== other ? ` (as ${rel})` : ''} map to the same output ${found.path}, which holds ${other}'s: refusing to replace it; give one of them another rel`,
  );
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
    throw writeError(dir, e, 'cannot create folder');
  }
  if (job.guardInputs) await checkSlotOwner(job, input);
  const meta = record(job, input, stamp, result);
  if (job.format === 'safetensors') {
    const path = stem + '.safetensors';
    const tensors = resultTensors(result, job.outputDtype);
    // The data section is the tensors' bytes in order (safetensorsBytes); its size and checksum go in the header.
    const h = createHash('sha256');
    let bytes = 0;
    for (const t of tensors) {
      h.update(t.data);
      bytes += t.data.byteLength;
    }
    await writeFileAtomic(path, safetensorsBytes(tensors, { ...meta, data_bytes: String(bytes), data_sha256: h.digest('hex') }));
    return { primary: path, files: [path] };
  }
  const recordFile = stem + '.tessera.json';
  await checkOutputTarget(recordFile); // a FIFO or link there is refused, not unlinked
  await unlink(recordFile).catch(() => undefined);
  const contents: { path: string; bytes: Uint8Array }[] = [];
  if (job.format === 'npy') {
    for (const t of resultTensors(result, job.outputDtype)) contents.push({ path: `${stem}.${t.name}.npy`, bytes: npyBytes(t) });
  } else if (job.format === 'vllm' || job.format === 'vllm-torch') {
    const encoding = job.format === 'vllm' ? 'npy' : 'torch';
    contents.push({ path: stem + '.vllm.json', bytes: Buffer.from(JSON.stringify(toVllmContentPart(result, job.family, { encoding, outputDtype: job.outputDtype }))) });
  } else if (job.format === 'vllm-encoder-cache') {
    const identifier = encoderCacheIdentifier(stamp.sha256, input.path);
    meta['identifier'] = identifier;
    const folder = join(job.dir, identifier);
    try {
      await mkdir(folder, { recursive: true });
    } catch (e) {
      throw ioError(folder, 'cannot create folder', e);
    }
    contents.push({ path: join(folder, ENCODER_CACHE_FILE), bytes: encoderCacheBytes(result, meta, job.outputDtype) });
  } else {
    contents.push({ path: stem + '.sglang.json', bytes: Buffer.from(toSglangItemJson(result, { outputDtype: job.outputDtype })) });
  }
  const files: RecordedFile[] = [];
  for (const c of contents) {
    await writeFileAtomic(c.path, c.bytes);
    files.push({ name: relative(dir, c.path).split(sep).join('/'), bytes: c.bytes.byteLength, sha256: createHash('sha256').update(c.bytes).digest('hex') });
  }
  await writeFileAtomic(recordFile, JSON.stringify({ record: typedRecord(meta), files }, null, 1) + '\n');
  return { primary: primaryOutput(job, input), files: [...contents.map((c) => c.path), recordFile] };
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
