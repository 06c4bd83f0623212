// GGUF reader (v2 and v3, little-endian): the header only — metadata and tensor infos — read with
// bounded reads from a file handle. Tensor data is never read here: the result gives each tensor's
// absolute byte range, which goes into the TowerSpec for native io (docs/models/gemma4-vision.md#format).
//
// Everything read from the file is distrusted: counts are checked against the bytes that could
// possibly hold them before any loop or allocation, every read is bounds-checked, tensor ranges must
// lie inside the file and not overlap. Failures are TesseraErrors: ERR_MODEL_FORMAT for "not a GGUF
// we read" (magic, version, unknown tensor type), ERR_WEIGHTS_CORRUPT for a damaged one.
import { TesseraError } from '../errors.js';
import { openRegular } from '../io/open-regular.js';
import { DTYPES, type DType } from '../spec/types.js';
import type { TensorIndex } from './tensor-index.js';

/** GGUF metadata value types (gguf_type). */
export const GgufValueType = {
  U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12,
} as const;
export type GgufValueTypeId = (typeof GgufValueType)[keyof typeof GgufValueType];

export interface GgufArray {
  kind: 'array';
  elementType: number;
  length: number;
  /** The elements; null when the array is longer than MAX_KEPT_ARRAY (a tokenizer vocabulary): skipped. */
  values: GgufValue[] | null;
}
/** u64/i64 values that do not fit a double exactly are bigints. */
export type GgufValue = number | bigint | boolean | string | GgufArray;

/** ggml tensor types: name, elements per block, bytes per block. Ids not listed are unknown. */
const GGML_TYPES: Record<number, { name: string; block: number; bytes: number }> = {
  0: { name: 'F32', block: 1, bytes: 4 },
  1: { name: 'F16', block: 1, bytes: 2 },
  2: { name: 'Q4_0', block: 32, bytes: 18 },
  3: { name: 'Q4_1', block: 32, bytes: 20 },
  6: { name: 'Q5_0', block: 32, bytes: 22 },
  7: { name: 'Q5_1', block: 32, bytes: 24 },
  8: { name: 'Q8_0', block: 32, bytes: 34 },
  9: { name: 'Q8_1', block: 32, bytes: 36 },
  10: { name: 'Q2_K', block: 256, bytes: 84 },
  11: { name: 'Q3_K', block: 256, bytes: 110 },
  12: { name: 'Q4_K', block: 256, bytes: 144 },
  13: { name: 'Q5_K', block: 256, bytes: 176 },
  14: { name: 'Q6_K', block: 256, bytes: 210 },
  15: { name: 'Q8_K', block: 256, bytes: 292 },
  16: { name: 'IQ2_XXS', block: 256, bytes: 66 },
  17: { name: 'IQ2_XS', block: 256, bytes: 74 },
  18: { name: 'IQ3_XXS', block: 256, bytes: 98 },
  19: { name: 'IQ1_S', block: 256, bytes: 50 },
  20: { name: 'IQ4_NL', block: 32, bytes: 18 },
  21: { name: 'IQ3_S', block: 256, bytes: 110 },
  22: { name: 'IQ2_S', block: 256, bytes: 82 },
  23: { name: 'IQ4_XS', block: 256, bytes: 136 },
  24: { name: 'I8', block: 1, bytes: 1 },
  25: { name: 'I16', block: 1, bytes: 2 },
  26: { name: 'I32', block: 1, bytes: 4 },
  27: { name: 'I64', block: 1, bytes: 8 },
  28: { name: 'F64', block: 1, bytes: 8 },
  29: { name: 'IQ1_M', block: 256, bytes: 56 },
  30: { name: 'BF16', block: 1, bytes: 2 },
  34: { name: 'TQ1_0', block: 256, bytes: 54 },
  35: { name: 'TQ2_0', block: 256, bytes: 66 },
  39: { name: 'MXFP4', block: 32, bytes: 17 },
};

/**
 * The ggml types tessera reads, and their TowerSpec dtype: the float types it computes with, and
 * Q8_0, which the native weight stores widen to f32 exactly as ggml's dequantize_row_q8_0 does.
 */
const READ_TYPES: Record<number, DType> = { 0: 'f32', 1: 'f16', 30: 'bf16', 8: 'q8_0' };
const READ_TYPE_NAMES =
  Object.entries(READ_TYPES)
    .sort(([, a], [, b]) => DTYPES.indexOf(a) - DTYPES.indexOf(b))
    .map(([id]) => GGML_TYPES[Number(id)]!.name)
    .join(', ') + ' are';

export interface GgufTensorInfo {
  name: string;
  /** ggml order: ne[0] is the innermost (fastest) dimension; the numpy shape is ne reversed. */
  ne: number[];
  type: number;
  typeName: string;
  /** Absolute byte offset of the data in the file, and its length. */
  offset: number;
  length: number;
}

export interface GgufHeader {
  path: string;
  version: number;
  fileSize: number;
  alignment: number;
  /** Absolute offset of the tensor data section. */
  dataOffset: number;
  metadata: Map<string, GgufValue>;
  tensors: Map<string, GgufTensorInfo>;
}

/** Arrays longer than this are walked (bounds-checked) but their values are not kept. */
export const MAX_KEPT_ARRAY = 1 << 16;
/** A header (metadata + tensor infos) larger than this is refused as corrupt: no real file comes near. */
const MAX_HEADER_BYTES = 64 * 1024 * 1024; // tokenizer-heavy real headers are ~10 MiB
const FIRST_READ_BYTES = 1 << 20;
const MAX_NDIMS = 4;
const MAX_ARRAY_DEPTH = 8;
const DEFAULT_ALIGNMENT = 32;
const MIN_ALIGNMENT = 8;
const MAX_ALIGNMENT = 1 << 20;
const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32

const corrupt = (path: string, what: string) => new TesseraError('ERR_WEIGHTS_CORRUPT', `${path}: ${what}`);
const format = (path: string, what: string) => new TesseraError('ERR_MODEL_FORMAT', `${path}: ${what}`);

/** Thrown internally when the parse runs past the bytes read so far (but not past the file). */
class NeedMore {
  constructor(readonly upTo: number) {}
}

/** Bounds-checked little-endian cursor over the first `buf.length` bytes of a `fileSize`-byte file. */
class Cursor {
  pos = 0;
  private readonly view: DataView;

  constructor(
    private readonly buf: Buffer,
    private readonly fileSize: number,
    private readonly path: string,
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  /** Bytes of the file after the cursor: the most any count read here can describe. */
  remaining(): number {
    return this.fileSize - this.pos;
  }

  private need(n: number, what: string): void {
    const end = this.pos + n;
    if (end > this.fileSize) throw corrupt(this.path, `truncated: ${what} at byte ${this.pos} needs ${n} bytes, file has ${this.fileSize}`);
    if (end > this.buf.length) throw new NeedMore(end);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.pos++);
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos, true);
    this.pos += 4;
    return v;
  }
  /** A u64 that must be a safe integer (counts, lengths, offsets). */
  u64(what: string): number {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos, true);
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw corrupt(this.path, `${what} ${v} is out of range`);
    return Number(v);
  }

  value(type: number, what: string, depth = 0): GgufValue {
    const v = this.view;
    switch (type) {
      case GgufValueType.U8: this.need(1, what); return v.getUint8(this.pos++);
      case GgufValueType.I8: this.need(1, what); return v.getInt8(this.pos++);
      case GgufValueType.U16: this.need(2, what); this.pos += 2; return v.getUint16(this.pos - 2, true);
      case GgufValueType.I16: this.need(2, what); this.pos += 2; return v.getInt16(this.pos - 2, true);
      case GgufValueType.U32: this.need(4, what); this.pos += 4; return v.getUint32(this.pos - 4, true);
      case GgufValueType.I32: this.need(4, what); this.pos += 4; return v.getInt32(this.pos - 4, true);
      case GgufValueType.F32: this.need(4, what); this.pos += 4; return v.getFloat32(this.pos - 4, true);
      case GgufValueType.F64: this.need(8, what); this.pos += 8; return v.getFloat64(this.pos - 8, true);
      case GgufValueType.BOOL: {
        this.need(1, what);
        const b = v.getUint8(this.pos++);
        if (b > 1) throw corrupt(this.path, `${what}: bool byte ${b} is neither 0 nor 1`);
        return b === 1;
      }
      case GgufValueType.U64: {
        this.need(8, what);
        this.pos += 8;
        const x = v.getBigUint64(this.pos - 8, true);
        return x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x;
      }
      case GgufValueType.I64: {
        this.need(8, what);
        this.pos += 8;
        const x = v.getBigInt64(this.pos - 8, true);
        return x <= BigInt(Number.MAX_SAFE_INTEGER) && x >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(x) : x;
      }
      case GgufValueType.STRING: return this.string(what);
      case GgufValueType.ARRAY:
        // Nesting is legal but never deep in real files; a bound keeps a hostile file off the stack.
        if (depth >= MAX_ARRAY_DEPTH) throw corrupt(this.path, `${what}: arrays nested deeper than ${MAX_ARRAY_DEPTH}`);
        return this.array(what, depth + 1);
      default:
        throw corrupt(this.path, `${what}: unknown metadata value type ${type}`);
    }
  }

  string(what: string): string {
    const n = this.u64(`${what} (string length)`);
    this.need(n, `${what} (string of ${n} bytes)`);
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }

  private array(what: string, depth: number): GgufArray {
    const elementType = this.u32(`${what} (array element type)`);
    const length = this.u64(`${what} (array length)`);
    const minBytes = minValueBytes(elementType);
    if (minBytes === 0) throw corrupt(this.path, `${what}: unknown array element type ${elementType}`);
    // A lying count fails here, before any loop: each element takes at least minBytes.
    if (length * minBytes > this.remaining())
      throw corrupt(this.path, `${what}: array of ${length} elements cannot fit in the ${this.remaining()} bytes left`);
    const keep = length <= MAX_KEPT_ARRAY;
    const values: GgufValue[] | null = keep ? [] : null;
    const fixed = fixedValueBytes(elementType);
    if (!keep && fixed > 0) {
      this.need(length * fixed, what);
      this.pos += length * fixed;
    } else {
      for (let i = 0; i < length; i++) {
        const x = this.value(elementType, `${what}[${i}]`, depth);
        if (values) values.push(x);
      }
    }
    return { kind: 'array', elementType, length, values };
  }
}

function fixedValueBytes(type: number): number {
  switch (type) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 10: case 11: case 12: return 8;
    default: return 0;
  }
}

/** Fewest bytes an element of this type can take (a string: its length; an array: type + count). */
function minValueBytes(type: number): number {
  if (type === GgufValueType.STRING) return 8;
  if (type === GgufValueType.ARRAY) return 12;
  return fixedValueBytes(type);
}

function parse(buf: Buffer, fileSize: number, path: string): GgufHeader {
  const c = new Cursor(buf, fileSize, path);
  if (fileSize < 4) throw format(path, `not a GGUF file (${fileSize} bytes)`);
  const magic = c.u32('magic');
  if (magic !== GGUF_MAGIC) throw format(path, `not a GGUF file (magic 0x${magic.toString(16).padStart(8, '0')})`);
  const version = c.u32('version');
  if (version === 1) throw format(path, 'GGUF version 1 (32-bit counts) is not supported: convert it again');
  if (version !== 2 && version !== 3) {
    const swapped = ((version & 0xff) << 24) | ((version & 0xff00) << 8) | ((version >>> 8) & 0xff00) | (version >>> 24);
    if (swapped === 2 || swapped === 3) throw format(path, 'big-endian GGUF files are not supported');
    throw format(path, `unsupported GGUF version ${version} (2 and 3 are read)`);
  }
  const tensorCount = c.u64('tensor count');
  const kvCount = c.u64('metadata count');
  // Each kv takes >= 13 bytes (key length, type, 1-byte value); each tensor info >= 32.
  if (kvCount * 13 + tensorCount * 32 > c.remaining())
    throw corrupt(path, `header claims ${tensorCount} tensors and ${kvCount} metadata entries: more than the file can hold`);

  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key #${i}`);
    if (metadata.has(key)) throw corrupt(path, `duplicate metadata key '${key}'`);
    const type = c.u32(`type of metadata '${key}'`);
    metadata.set(key, c.value(type, `metadata '${key}'`));
  }

  let alignment = DEFAULT_ALIGNMENT;
  const a = metadata.get('general.alignment');
  if (a !== undefined) {
    // The GGUF spec: "it must be a multiple of 8"; llama.cpp only asks for a power of two, but no
    // writer uses less than 32, and a smaller value that is not the file's own misplaces every tensor.
    if (typeof a !== 'number' || !Number.isInteger(a) || a <= 0 || (a & (a - 1)) !== 0 || a % MIN_ALIGNMENT !== 0 || a > MAX_ALIGNMENT)
      throw corrupt(path, `general.alignment ${typeof a === 'object' ? 'is an array' : String(a)} is not a power of two from ${MIN_ALIGNMENT} to ${MAX_ALIGNMENT}`);
    alignment = a;
  }

  const infos: Array<Omit<GgufTensorInfo, 'offset'> & { rel: number }> = [];
  const seen = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`name of tensor #${i}`);
    if (seen.has(name)) throw corrupt(path, `duplicate tensor '${name}'`);
    seen.add(name);
    const nd = c.u32(`dimension count of tensor '${name}'`);
    if (nd < 1 || nd > MAX_NDIMS) throw corrupt(path, `tensor '${name}' has ${nd} dimensions (1..${MAX_NDIMS})`);
    const ne: number[] = [];
    let elements = 1;
    for (let d = 0; d < nd; d++) {
      const n = c.u64(`dimension ${d} of tensor '${name}'`);
      if (n === 0) throw corrupt(path, `tensor '${name}' has an empty dimension ${d}`);
      elements *= n;
      if (elements > Number.MAX_SAFE_INTEGER) throw corrupt(path, `tensor '${name}' has too many elements`);
      ne.push(n);
    }
    const type = c.u32(`type of tensor '${name}'`);
    const info = GGML_TYPES[type];
    if (!info) throw format(path, `tensor '${name}' has unknown ggml type ${type}`);
    if (ne[0]! % info.block !== 0)
      throw corrupt(path, `tensor '${name}' (${info.name}): row of ${ne[0]} elements is not a whole number of ${info.block}-element blocks`);
    const length = (elements / info.block) * info.bytes;
    if (length > fileSize) throw corrupt(path, `tensor '${name}' (${length} bytes) is larger than the file`);
    const rel = c.u64(`offset of tensor '${name}'`);
    if (rel % alignment !== 0) throw corrupt(path, `tensor '${name}' offset ${rel} is not a multiple of the alignment ${alignment}`);
    infos.push({ name, ne, type, typeName: info.name, length, rel });
  }

  const dataOffset = Math.ceil(c.pos / alignment) * alignment;
  if (dataOffset > fileSize && tensorCount > 0) throw corrupt(path, `data section starts at ${dataOffset}, past the end (${fileSize})`);
  const tensors = new Map<string, GgufTensorInfo>();
  for (const t of infos) {
    const offset = dataOffset + t.rel;
    if (offset + t.length > fileSize)
      throw corrupt(path, `tensor '${t.name}' [${offset}, ${offset + t.length}) runs past the end of the file (${fileSize} bytes)`);
    tensors.set(t.name, { name: t.name, ne: t.ne, type: t.type, typeName: t.typeName, offset, length: t.length });
  }
  const sorted = [...tensors.values()].sort((x, y) => x.offset - y.offset);
  for (let i = 1; i < sorted.length; i++) {
    const p = sorted[i - 1]!;
    const q = sorted[i]!;
    if (q.offset < p.offset + p.length) throw corrupt(path, `tensors '${p.name}' and '${q.name}' overlap`);
  }
  // Writers put the data right after the header and pad each tensor to the alignment at most, so
  // the file ends less than one alignment after the last tensor. More left over means the header
  // places the data section elsewhere than the writer did (an alignment that is not the file's).
  const last = sorted[sorted.length - 1];
  if (last && fileSize - (last.offset + last.length) >= alignment)
    throw corrupt(
      path,
      `${fileSize - (last.offset + last.length)} bytes follow the last tensor ('${last.name}'), more than the alignment ${alignment} pads: ` +
        `the header's alignment or tensor offsets do not match the data`,
    );
  return { path, version, fileSize, alignment, dataOffset, metadata, tensors };
}

/**
 * Reads a GGUF file's header. Reads a first chunk and, if the header is longer, re-reads a larger
 * prefix (doubling, never more than the file or MAX_HEADER_BYTES): the tensor data is never read.
 */
export async function readGgufHeader(path: string): Promise<GgufHeader> {
  const { handle: fh, size: fileSize } = await openRegular(path, { what: 'GGUF file', notFound: 'ERR_MODEL_NOT_FOUND', notRegular: 'ERR_MODEL_FORMAT' });
  try {
    let want = Math.min(fileSize, FIRST_READ_BYTES);
    for (;;) {
      const buf = Buffer.alloc(want);
      const { bytesRead } = await fh.read(buf, 0, want, 0);
      if (bytesRead !== want) throw corrupt(path, `short read (${bytesRead} of ${want} bytes): file changed while reading?`);
      try {
        return parse(buf, fileSize, path);
      } catch (e) {
        if (!(e instanceof NeedMore)) throw e;
        if (want >= MAX_HEADER_BYTES) throw corrupt(path, `header larger than ${MAX_HEADER_BYTES} bytes`);
        want = Math.min(fileSize, MAX_HEADER_BYTES, Math.max(want * 2, e.upTo));
      }
    }
  } finally {
    await fh.close();
  }
}

/** The TowerSpec dtype of a tensor, or a refusal naming the tensor and its type (other quantisations, integers...). */
export function ggufTensorDType(h: GgufHeader, t: GgufTensorInfo): DType {
  const d = READ_TYPES[t.type];
  if (!d) throw format(h.path, `tensor '${t.name}' has type ${t.typeName}, which tessera does not read (${READ_TYPE_NAMES})`);
  return d;
}

/**
 * The header as a TensorIndex (the spec builders' common input): numpy-order shapes (ne reversed),
 * and a dtype only for the types tessera reads: any other tensor stays in the index (an Ollama
 * file's text model may be quantised otherwise) and is refused only if a builder asks for it.
 */
export function ggufTensorIndex(h: GgufHeader): TensorIndex {
  const index: TensorIndex = { files: [h.path], tensors: new Map() };
  for (const t of h.tensors.values())
    index.tensors.set(t.name, {
      name: t.name,
      storedType: t.typeName,
      dtype: READ_TYPES[t.type],
      shape: [...t.ne].reverse(),
      file: 0,
      offset: t.offset,
      length: t.length,
    });
  return index;
}

// ---- typed metadata access (tolerant of the integer width where only the value matters)

export function ggufNumber(h: GgufHeader, key: string): number | undefined {
  const v = h.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${key}' = ${v} is out of range`);
  throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${key}' should be a number, found ${describe(v)}`);
}

export function ggufString(h: GgufHeader, key: string): string | undefined {
  const v = h.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${key}' should be a string, found ${describe(v)}`);
  return v;
}

/** What a GGUF file is: its general.architecture and, for a llama.cpp mmproj (architecture 'clip'), its projector type. */
export function ggufKind(h: GgufHeader): { arch: string | undefined; projector: string | undefined } {
  const arch = ggufString(h, 'general.architecture');
  const projector = arch === 'clip' ? (ggufString(h, 'clip.projector_type') ?? ggufString(h, 'clip.vision.projector_type')) : undefined;
  return { arch, projector };
}

export function ggufNumberArray(h: GgufHeader, key: string): number[] | undefined {
  const v = h.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'object' || v.kind !== 'array' || !v.values || !v.values.every((x) => typeof x === 'number'))
    throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${key}' should be an array of numbers, found ${describe(v)}`);
  return v.values as number[];
}

function describe(v: GgufValue): string {
  if (typeof v === 'object') return `an array of ${v.length}`;
  return `${typeof v} ${JSON.stringify(typeof v === 'bigint' ? v.toString() : v)}`;
}

export function ggufBool(h: GgufHeader, key: string): boolean | undefined {
  const v = h.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${key}' should be a bool, found ${describe(v)}`);
  return v;
}

export function ggufBoolArray(h: GgufHeader, key: string): boolean[] | undefined {
  const v = h.metadata.get(key);
  if (v === undefined) return undefined;
  if (typeof v !== 'object' || v.kind !== 'array' || !v.values || !v.values.every((x) => typeof x === 'boolean'))
    throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${key}' should be an array of bools, found ${describe(v)}`);
  return v.values as boolean[];
}
