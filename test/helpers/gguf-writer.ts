// A small GGUF writer for tests (docs/models/gemma4-vision.md#format): builds Ollama-layout files and
// deliberately broken ones. It writes exactly what it is given; no validation, so tests can lie.
export const T = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12 } as const;
export const GGML = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, Q4_K: 12, BF16: 30 } as const;

export type KV =
  | { key: string; type: number; value: number | bigint | boolean | string }
  | { key: string; type: typeof T.ARRAY; elementType: number; value: Array<number | bigint | boolean | string> };

export interface TensorIn {
  name: string;
  ne: number[];
  type: number;
  data: Uint8Array;
  /** Override the offset written in the tensor info (relative to the data section). */
  offset?: number;
}

export interface GgufIn {
  version?: number;
  alignment?: number;
  kv: KV[];
  tensors: TensorIn[];
  /** Override the counts written in the header. */
  tensorCount?: number;
  kvCount?: number;
}

class Out {
  private chunks: Buffer[] = [];
  size = 0;
  push(b: Buffer) {
    this.chunks.push(b);
    this.size += b.length;
  }
  u32(v: number) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.push(b); }
  u64(v: number | bigint) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  str(s: string) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  scalar(type: number, v: number | bigint | boolean | string) {
    const b = Buffer.alloc(8);
    switch (type) {
      case T.U8: b.writeUInt8(Number(v)); return this.push(b.subarray(0, 1));
      case T.I8: b.writeInt8(Number(v)); return this.push(b.subarray(0, 1));
      case T.U16: b.writeUInt16LE(Number(v)); return this.push(b.subarray(0, 2));
      case T.I16: b.writeInt16LE(Number(v)); return this.push(b.subarray(0, 2));
      case T.U32: b.writeUInt32LE(Number(v)); return this.push(b.subarray(0, 4));
      case T.I32: b.writeInt32LE(Number(v)); return this.push(b.subarray(0, 4));
      case T.F32: b.writeFloatLE(Number(v)); return this.push(b.subarray(0, 4));
      case T.BOOL: b.writeUInt8(v ? 1 : 0); return this.push(b.subarray(0, 1));
      case T.U64: b.writeBigUInt64LE(BigInt(v)); return this.push(b);
      case T.I64: b.writeBigInt64LE(BigInt(v)); return this.push(b);
      case T.F64: b.writeDoubleLE(Number(v)); return this.push(b);
      case T.STRING: return this.str(String(v));
      default: throw new Error(`writer: scalar type ${type}`);
    }
  }
  concat() { return Buffer.concat(this.chunks); }
}

export function writeGguf(g: GgufIn): Buffer {
  const align = g.alignment ?? 32;
  const o = new Out();
  o.push(Buffer.from('GGUF', 'latin1'));
  o.u32(g.version ?? 3);
  o.u64(g.tensorCount ?? g.tensors.length);
  o.u64(g.kvCount ?? g.kv.length);
  for (const kv of g.kv) {
    o.str(kv.key);
    o.u32(kv.type);
    if (kv.type === T.ARRAY) {
      const a = kv as Extract<KV, { elementType: number }>;
      o.u32(a.elementType);
      o.u64(a.value.length);
      for (const x of a.value) o.scalar(a.elementType, x);
    } else o.scalar(kv.type, (kv as { value: number | bigint | boolean | string }).value);
  }
  let rel = 0;
  const placed: number[] = [];
  for (const t of g.tensors) {
    placed.push(rel);
    rel = Math.ceil((rel + t.data.length) / align) * align;
  }
  g.tensors.forEach((t, i) => {
    o.str(t.name);
    o.u32(t.ne.length);
    for (const n of t.ne) o.u64(n);
    o.u32(t.type);
    o.u64(t.offset ?? placed[i]!);
  });
  const pad = (Math.ceil(o.size / align) * align) - o.size;
  o.push(Buffer.alloc(pad));
  const dataStart = o.size;
  g.tensors.forEach((t, i) => {
    const at = dataStart + placed[i]!;
    if (o.size < at) o.push(Buffer.alloc(at - o.size));
    o.push(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  });
  return o.concat();
}

export function f32Bytes(values: ArrayLike<number>): Uint8Array {
  const a = Float32Array.from(values as ArrayLike<number>);
  return new Uint8Array(a.buffer);
}
