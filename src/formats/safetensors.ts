// safetensors (https://github.com/huggingface/safetensors: an 8-byte little-endian header length, a
// JSON table, then the data), read and written here only.
// Reading weights: only the header is read; every field is checked against the file's size, so a
// corrupt or hostile file is ERR_WEIGHTS_CORRUPT, never a crash.
// Writing tessera's outputs (--out, --out-dir): the JSON header (tensor name -> dtype, shape,
// data_offsets; `__metadata__` holds strings only) is padded with spaces so the data starts 8-byte
// aligned, then the tensors' bytes follow in order (safetensors-writer.ts streams a large file);
// readSafetensorsOutputHeader reads an output's record back.
import { TesseraError } from '../errors.js';
import { openRegular } from '../io/open-regular.js';
import { openOwnFile } from '../io/read-back.js';
import type { DType } from '../spec/types.js';
import { jsonStructureProblem } from './json-structure.js';
import { elementCount, type IndexedTensor } from './tensor-index.js';

const STORED: Record<string, { dtype?: DType; bytes: number }> = {
  F32: { dtype: 'f32', bytes: 4 },
  F16: { dtype: 'f16', bytes: 2 },
  BF16: { dtype: 'bf16', bytes: 2 },
  F64: { bytes: 8 },
  I64: { bytes: 8 },
  I32: { bytes: 4 },
  I16: { bytes: 2 },
  I8: { bytes: 1 },
  U8: { bytes: 1 },
  BOOL: { bytes: 1 },
  F8_E4M3: { bytes: 1 },
  F8_E5M2: { bytes: 1 },
};

/** Headers larger than this are refused: real ones are a few hundred KiB. */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;
/** A header is an object of descriptors whose shape is an array: 3 levels; room for odd metadata. */
const MAX_HEADER_DEPTH = 16;

export interface SafetensorsHeader {
  tensors: IndexedTensor[];
  metadata: Record<string, string>;
}

function corrupt(path: string, why: string): TesseraError {
  return new TesseraError('ERR_WEIGHTS_CORRUPT', `${path}: ${why}`);
}

/** Parses the header of one safetensors file; tensors get `file` = fileIndex. */
export async function readSafetensorsHeader(path: string, fileIndex = 0): Promise<SafetensorsHeader> {
  const { handle: fh, size } = await openRegular(path, { what: 'weights file', notFound: 'ERR_MODEL_NOT_FOUND', notRegular: 'ERR_MODEL_FORMAT' });
  try {
    if (size < 8) throw corrupt(path, `file is ${size} bytes, too short for a safetensors header`);
    const lenBuf = Buffer.alloc(8);
    await fh.read(lenBuf, 0, 8, 0);
    const headerLen = lenBuf.readBigUInt64LE(0);
    if (headerLen > BigInt(size - 8))
      throw corrupt(path, `header length ${headerLen} runs past the end of the ${size}-byte file`);
    if (headerLen > BigInt(MAX_HEADER_BYTES)) throw corrupt(path, `header length ${headerLen} is implausibly large`);
    const n = Number(headerLen);
    const buf = Buffer.alloc(n);
    const { bytesRead } = await fh.read(buf, 0, n, 8);
    if (bytesRead !== n) throw corrupt(path, `short read of the header (${bytesRead} of ${n} bytes)`);
    return parseHeader(path, buf.toString('utf8'), 8 + n, size, fileIndex);
  } finally {
    await fh.close();
  }
}

function parseHeader(path: string, text: string, dataStart: number, fileSize: number, file: number): SafetensorsHeader {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw corrupt(path, `header is not valid JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw corrupt(path, 'header is not a JSON object');
  const problem = jsonStructureProblem(text, { maxDepth: MAX_HEADER_DEPTH });
  if (problem) throw corrupt(path, `header: ${problem}`);
  const dataSize = fileSize - dataStart;
  const tensors: IndexedTensor[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (typeof entry === 'object' && entry !== null) metadata = entry as Record<string, string>;
      continue;
    }
    if (typeof entry !== 'object' || entry === null) throw corrupt(path, `tensor '${name}' has no descriptor`);
    const { dtype, shape, data_offsets: offs } = entry as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof dtype !== 'string' || !Object.hasOwn(STORED, dtype))
      throw corrupt(path, `tensor '${name}' has unknown dtype ${typeof dtype === 'string' ? JSON.stringify(dtype.slice(0, 40)) : `(a ${Array.isArray(dtype) ? 'array' : typeof dtype})`}`);
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0))
      throw corrupt(path, `tensor '${name}' has an invalid shape`);
    if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((d) => Number.isSafeInteger(d) && d >= 0))
      throw corrupt(path, `tensor '${name}' has invalid data_offsets`);
    const [begin, end] = offs as [number, number];
    if (begin > end || end > dataSize)
      throw corrupt(path, `tensor '${name}' data [${begin}, ${end}) lies outside the ${dataSize}-byte data section`);
    const stored = STORED[dtype]!;
    const expected = elementCount(shape as number[]) * stored.bytes;
    if (end - begin !== expected)
      throw corrupt(path, `tensor '${name}' holds ${end - begin} bytes but its shape and dtype need ${expected}`);
    tensors.push({
      name,
      storedType: dtype,
      dtype: stored.dtype,
      shape: shape as number[],
      file,
      offset: dataStart + begin,
      length: end - begin,
    });
  }
  const sorted = [...tensors].sort((a, b) => a.offset - b.offset);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!, cur = sorted[i]!;
    if (cur.offset < prev.offset + prev.length && cur.length > 0 && prev.length > 0)
      throw corrupt(path, `tensors '${prev.name}' and '${cur.name}' overlap`);
  }
  return { tensors, metadata };
}

// ---- writing

/** A tensor as tessera writes it (src/outputs/tensors.ts names them). */
export interface WritableTensor {
  name: string;
  dtype: string;
  shape: number[];
  data: ArrayBufferView;
}

export interface SafetensorsEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/** The length prefix and header for these entries (offsets relative to the data start). */
export function safetensorsHeader(entries: Iterable<[string, SafetensorsEntry]>, metadata: Record<string, string>): Buffer {
  const header: Record<string, unknown> = { __metadata__: metadata };
  for (const [k, v] of entries) header[k] = v;
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - ((8 + Buffer.byteLength(text)) % 8)) % 8); // data starts 8-byte aligned
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  return Buffer.concat([len, Buffer.from(text)]);
}

/** One whole safetensors file holding `tensors` (per-image outputs are small enough to build in memory). */
export function safetensorsBytes(tensors: readonly WritableTensor[], metadata: Record<string, string>): Buffer {
  const entries: [string, SafetensorsEntry][] = [];
  let offset = 0;
  for (const t of tensors) {
    entries.push([t.name, { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] }]);
    offset += t.data.byteLength;
  }
  return Buffer.concat([
    safetensorsHeader(entries, metadata),
    ...tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)),
  ]);
}

/**
 * The __metadata__ of one of tessera's safetensors outputs (bounded read) and where its data section
 * starts, or undefined when it is not one. Opened as read-back.ts opens what tessera wrote: never
 * through a link, never blocking on a FIFO, regular files only.
 */
export async function readSafetensorsOutputHeader(path: string): Promise<{ metadata: Record<string, string>; dataStart: number } | undefined> {
  const f = await openOwnFile(path);
  if (!f) return undefined;
  try {
    const lenBuf = Buffer.alloc(8);
    if ((await f.handle.read(lenBuf, 0, 8, 0)).bytesRead !== 8) return undefined;
    const n = Number(lenBuf.readBigUInt64LE(0));
    if (n <= 0 || n > 1 << 24 || 8 + n > f.size) return undefined;
    const text = Buffer.alloc(n);
    if ((await f.handle.read(text, 0, n, 8)).bytesRead !== n) return undefined;
    const metadata = (JSON.parse(text.toString('utf8')) as { __metadata__?: Record<string, string> }).__metadata__;
    return metadata && typeof metadata === 'object' ? { metadata, dataStart: 8 + n } : undefined;
  } catch {
    return undefined;
  } finally {
    await f.handle.close().catch(() => undefined);
  }
}
