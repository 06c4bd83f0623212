// The GGUF header reader (src/formats/gguf.ts): the fixture, every metadata type, alignment, and one
// test per refusal. No addon needed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { TesseraError } from '../src/errors.js';
import { MAX_KEPT_ARRAY, ggufBool, ggufBoolArray, ggufTensorDType, readGgufHeader } from '../src/formats/gguf.js';
import { GEMMA4_MMPROJ, GEMMA4_MODEL, readSafetensors } from './helpers/gemma4-fixtures.js';
import { GGML, T, type GgufIn, writeGguf } from './helpers/gguf-writer.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-gguf-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(bytes: Buffer): string {
  const p = join(dir, `f${n++}.gguf`);
  writeFileSync(p, bytes);
  return p;
}

async function refusal(bytes: Buffer | string): Promise<TesseraError> {
  const p = typeof bytes === 'string' ? bytes : file(bytes);
  const e = await readGgufHeader(p).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(TesseraError);
  return e as TesseraError;
}

const f32 = (...v: number[]) => new Uint8Array(Float32Array.from(v).buffer);
const small = (over: Partial<GgufIn> = {}): GgufIn => ({
  kv: [{ key: 'general.architecture', type: T.STRING, value: 'test' }],
  tensors: [
    { name: 'a', ne: [4], type: GGML.F32, data: f32(1, 2, 3, 4) },
    { name: 'b', ne: [2, 3], type: GGML.F16, data: new Uint8Array(12) },
  ],
  ...over,
});

describe('GGUF reader: the llama.cpp mmproj fixture', () => {
  it('reads metadata, tensor infos and absolute offsets', async () => {
    const h = await readGgufHeader(GEMMA4_MMPROJ);
    expect(h.version).toBe(3);
    expect(h.alignment).toBe(32);
    expect(h.tensors.size).toBe(128);
    expect(h.metadata.get('general.architecture')).toBe('clip');
    expect(h.metadata.get('clip.vision.block_count')).toBe(3);
    expect(h.metadata.get('clip.has_vision_encoder')).toBe(true);
    expect(h.metadata.get('clip.vision.attention.layer_norm_epsilon')).toBe(Math.fround(1e-6));
    expect(h.metadata.get('clip.vision.image_std')).toEqual({ kind: 'array', elementType: T.F32, length: 3, values: [1, 1, 1] });
    expect(h.dataOffset % 32).toBe(0);
    const pos = h.tensors.get('v.position_embd.weight')!;
    expect(pos.ne).toEqual([64, 1024, 2]);
    expect(pos.typeName).toBe('F32');
    expect(ggufTensorDType(h, h.tensors.get('v.blk.0.attn_q.weight')!)).toBe('f16');
    // The F32 tensors' bytes at the computed offsets equal the HF folder's.
    const st = readSafetensors(join(GEMMA4_MODEL, 'model.safetensors'));
    const bytes = readFileSync(GEMMA4_MMPROJ);
    for (const [g, hf] of [
      ['v.std_scale', 'model.vision_tower.std_scale'],
      ['v.position_embd.weight', 'model.vision_tower.patch_embedder.position_embedding_table'],
      ['v.blk.2.attn_k_norm.weight', 'model.vision_tower.encoder.layers.2.self_attn.k_norm.weight'],
    ]) {
      const t = h.tensors.get(g)!;
      expect(Buffer.compare(bytes.subarray(t.offset, t.offset + t.length), Buffer.from(st.get(hf)!.bytes))).toBe(0);
    }
    const last = [...h.tensors.values()].reduce((a, b) => (a.offset > b.offset ? a : b));
    expect(last.offset + last.length).toBe(h.fileSize);
  });
});

describe('GGUF reader: metadata types, versions, alignment', () => {
  it('reads every value type, nested arrays, big u64 and version 2', async () => {
    const h = await readGgufHeader(
      file(
        writeGguf(
          small({
            version: 2,
            kv: [
              { key: 'u8', type: T.U8, value: 250 },
              { key: 'i8', type: T.I8, value: -5 },
              { key: 'u16', type: T.U16, value: 65000 },
              { key: 'i16', type: T.I16, value: -300 },
              { key: 'u32', type: T.U32, value: 4000000000 },
              { key: 'i32', type: T.I32, value: -7 },
              { key: 'f32', type: T.F32, value: 0.1 },
              { key: 'bool', type: T.BOOL, value: true },
              { key: 'str', type: T.STRING, value: 'héllo' },
              { key: 'u64', type: T.U64, value: 2n ** 60n },
              { key: 'i64', type: T.I64, value: -42n },
              { key: 'f64', type: T.F64, value: 0.1 },
              { key: 'arr.s', type: T.ARRAY, elementType: T.STRING, value: ['a', 'bc', ''] },
              { key: 'arr.i', type: T.ARRAY, elementType: T.I32, value: [1, -2, 3] },
            ],
          }),
        ),
      ),
    );
    const m = h.metadata;
    expect(h.version).toBe(2);
    expect([m.get('u8'), m.get('i8'), m.get('u16'), m.get('i16'), m.get('u32'), m.get('i32')]).toEqual([250, -5, 65000, -300, 4000000000, -7]);
    expect(m.get('f32')).toBe(Math.fround(0.1));
    expect(m.get('bool')).toBe(true);
    expect(m.get('str')).toBe('héllo');
    expect(m.get('u64')).toBe(2n ** 60n);
    expect(m.get('i64')).toBe(-42);
    expect(m.get('f64')).toBe(0.1);
    expect(m.get('arr.s')).toMatchObject({ length: 3, values: ['a', 'bc', ''] });
    expect(m.get('arr.i')).toMatchObject({ length: 3, values: [1, -2, 3] });
    expect(h.tensors.get('b')).toMatchObject({ ne: [2, 3], typeName: 'F16', length: 12 });
  });

  it('reads nested arrays and walks (without keeping) huge ones', async () => {
    // Nested: an array of 2 arrays of u8, written by hand.
    const inner = (vals: number[]) => Buffer.concat([u32(T.U8), u64(vals.length), Buffer.from(vals)]);
    const nested = Buffer.concat([str('nest'), u32(T.ARRAY), u32(T.ARRAY), u64(2), inner([1, 2]), inner([3])]);
    const big = Buffer.concat([str('big'), u32(T.ARRAY), u32(T.U8), u64(MAX_KEPT_ARRAY + 1), Buffer.alloc(MAX_KEPT_ARRAY + 1, 7)]);
    const bytes = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0), u64(2), nested, big]);
    const h = await readGgufHeader(file(bytes));
    expect(h.metadata.get('nest')).toMatchObject({
      length: 2,
      values: [{ kind: 'array', length: 2, values: [1, 2] }, { kind: 'array', length: 1, values: [3] }],
    });
    expect(h.metadata.get('big')).toMatchObject({ length: MAX_KEPT_ARRAY + 1, values: null });
  });

  it('places the data section by general.alignment, and reads headers longer than the first read', async () => {
    const long = 'x'.repeat(3 << 20); // past the 1 MiB first read
    const g = small({ alignment: 64, kv: [{ key: 'general.alignment', type: T.U32, value: 64 }, { key: 'pad', type: T.STRING, value: long }] });
    const bytes = writeGguf(g);
    const h = await readGgufHeader(file(bytes));
    expect(h.alignment).toBe(64);
    expect(h.dataOffset % 64).toBe(0);
    expect(h.tensors.get('b')!.offset).toBe(h.dataOffset + 64);
    expect(bytes.readFloatLE(h.tensors.get('a')!.offset + 8)).toBe(3);
  });
});

describe('GGUF reader: refusals', () => {
  const good = () => writeGguf(small());

  it('bad magic → ERR_MODEL_FORMAT', async () => {
    const b = good();
    b.write('GGML', 0, 'latin1');
    expect((await refusal(b)).code).toBe('ERR_MODEL_FORMAT');
  });
  it('version 1 → ERR_MODEL_FORMAT', async () => {
    const e = await refusal(writeGguf(small({ version: 1 })));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toMatch(/version 1/);
  });
  it('a byte-swapped version (big-endian file) → ERR_MODEL_FORMAT', async () => {
    const e = await refusal(writeGguf(small({ version: 0x03000000 })));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toMatch(/big-endian/);
  });
  it('an unknown version → ERR_MODEL_FORMAT', async () => {
    expect((await refusal(writeGguf(small({ version: 4 })))).code).toBe('ERR_MODEL_FORMAT');
  });
  it('a lying tensor count → ERR_WEIGHTS_CORRUPT', async () => {
    expect((await refusal(writeGguf(small({ tensorCount: 2 ** 40 })))).code).toBe('ERR_WEIGHTS_CORRUPT');
    expect((await refusal(writeGguf(small({ tensorCount: 3 })))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a lying metadata count → ERR_WEIGHTS_CORRUPT', async () => {
    expect((await refusal(writeGguf(small({ kvCount: 2 ** 50 })))).code).toBe('ERR_WEIGHTS_CORRUPT');
    expect((await refusal(writeGguf(small({ kvCount: 2 })))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a string longer than the file → ERR_WEIGHTS_CORRUPT', async () => {
    const b = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0), u64(1), u64(2n ** 52n), Buffer.from('key'), Buffer.alloc(64)]);
    const e = await refusal(b);
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/truncated/);
  });
  it('an array count that cannot fit → ERR_WEIGHTS_CORRUPT', async () => {
    const b = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0), u64(1), str('k'), u32(T.ARRAY), u32(T.U64), u64(1e12), Buffer.alloc(64)]);
    expect((await refusal(b)).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('arrays nested too deep → ERR_WEIGHTS_CORRUPT (no stack overflow)', async () => {
    const parts = [Buffer.from('GGUF'), u32(3), u64(0), u64(1), str('k'), u32(T.ARRAY)];
    for (let i = 0; i < 100000; i++) parts.push(u32(T.ARRAY), u64(1));
    parts.push(u32(T.U8), u64(0));
    expect((await refusal(Buffer.concat(parts))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('an unknown metadata value type → ERR_WEIGHTS_CORRUPT', async () => {
    const b = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0), u64(1), str('k'), u32(13), Buffer.alloc(16)]);
    expect((await refusal(b)).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a tensor offset past the end → ERR_WEIGHTS_CORRUPT naming the tensor', async () => {
    const g = small();
    g.tensors[1] = { ...g.tensors[1]!, offset: 1 << 20 };
    const e = await refusal(writeGguf(g));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/'b'/);
  });
  it('a tensor size past the end → ERR_WEIGHTS_CORRUPT', async () => {
    const g = small();
    g.tensors[1] = { ...g.tensors[1]!, ne: [2, 3000] };
    expect((await refusal(writeGguf(g))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a truncated data section → ERR_WEIGHTS_CORRUPT', async () => {
    const b = good();
    expect((await refusal(b.subarray(0, b.length - 1))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a misaligned offset → ERR_WEIGHTS_CORRUPT', async () => {
    const g = small();
    g.tensors[1] = { ...g.tensors[1]!, offset: 33 };
    expect((await refusal(writeGguf(g))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('overlapping tensors → ERR_WEIGHTS_CORRUPT', async () => {
    const g = small({ tensors: [{ name: 'a', ne: [16], type: GGML.F32, data: new Uint8Array(64) }, { name: 'b', ne: [4], type: GGML.F32, data: new Uint8Array(16), offset: 32 }] });
    const e = await refusal(writeGguf(g));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/overlap/);
  });
  it('an unknown tensor type → ERR_MODEL_FORMAT naming the tensor', async () => {
    const g = small();
    g.tensors[1] = { ...g.tensors[1]!, type: 31 };
    const e = await refusal(writeGguf(g));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toMatch(/'b'.*31/);
  });
  it('too many dimensions, an empty dimension, a duplicate name or key → ERR_WEIGHTS_CORRUPT', async () => {
    const g1 = small();
    g1.tensors[0] = { ...g1.tensors[0]!, ne: [1, 1, 1, 1, 4] };
    const g2 = small();
    g2.tensors[0] = { ...g2.tensors[0]!, ne: [4, 0] };
    const g3 = small();
    g3.tensors[1] = { ...g3.tensors[1]!, name: 'a' };
    const g4 = small({ kv: [{ key: 'k', type: T.U8, value: 1 }, { key: 'k', type: T.U8, value: 2 }] });
    for (const g of [g1, g2, g3, g4]) expect((await refusal(writeGguf(g))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('general.alignment that is not a power of two → ERR_WEIGHTS_CORRUPT', async () => {
    const g = small({ kv: [{ key: 'general.alignment', type: T.U32, value: 48 }] });
    expect((await refusal(writeGguf(g))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a quantised block count that does not divide the row → ERR_WEIGHTS_CORRUPT', async () => {
    const g = small({ tensors: [{ name: 'q', ne: [33], type: GGML.Q8_0, data: new Uint8Array(68) }] });
    expect((await refusal(writeGguf(g))).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a Q8_0 tensor is read as q8_0 with its blocks\' length; a Q8_0 length that is not its blocks\' is refused', async () => {
    const g = small({ tensors: [{ name: 'v.blk.0.ffn_down.weight', ne: [64, 3], type: GGML.Q8_0, data: new Uint8Array(6 * 34) }] });
    const h = await readGgufHeader(file(writeGguf(g)));
    const t = h.tensors.get('v.blk.0.ffn_down.weight')!;
    expect(t).toMatchObject({ typeName: 'Q8_0', length: 6 * 34, ne: [64, 3] });
    expect(ggufTensorDType(h, t)).toBe('q8_0');
    // The data section one block short: the tensor runs past the end of the file.
    const short = small({ tensors: [{ name: 'q', ne: [64, 3], type: GGML.Q8_0, data: new Uint8Array(5 * 34) }] });
    const e = await refusal(writeGguf(short));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/'q'/);
  });
  it('a quantised tensor is read, but refused for computing, naming the tensor and its type', async () => {
    const g = small({ tensors: [{ name: 'v.blk.0.attn_q.weight', ne: [64, 2], type: GGML.Q4_K, data: new Uint8Array(0) }] });
    g.tensors[0]!.ne = [256, 2];
    g.tensors[0]!.data = new Uint8Array(288);
    const h = await readGgufHeader(file(writeGguf(g)));
    const t = h.tensors.get('v.blk.0.attn_q.weight')!;
    expect(t.length).toBe(288);
    let err: unknown;
    try {
      ggufTensorDType(h, t);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TesseraError);
    expect((err as TesseraError).code).toBe('ERR_MODEL_FORMAT');
    expect((err as TesseraError).message).toMatch(/v\.blk\.0\.attn_q\.weight.*Q4_K.*F32, F16, BF16, Q8_0/);
  });
  it('bools and bool arrays (the Qwen mmproj keys): read as such, a byte other than 0 / 1 is corrupt, another type is refused naming the key', async () => {
    const kv = [
      { key: 'clip.use_gelu', type: T.BOOL, value: true },
      { key: 'clip.vision.is_deepstack_layers', type: T.ARRAY, elementType: T.BOOL, value: [false, true, true, false] },
      { key: 'clip.vision.n_wa_pattern', type: T.U32, value: 8 },
      { key: 'clip.vision.image_mean', type: T.ARRAY, elementType: T.F32, value: [0.5, 0.5, 0.5] },
    ] as GgufIn['kv'];
    const h = await readGgufHeader(file(writeGguf(small({ kv }))));
    expect(ggufBool(h, 'clip.use_gelu')).toBe(true);
    expect(ggufBoolArray(h, 'clip.vision.is_deepstack_layers')).toEqual([false, true, true, false]);
    expect(ggufBool(h, 'clip.use_silu')).toBeUndefined();
    expect(() => ggufBool(h, 'clip.vision.n_wa_pattern')).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID', message: expect.stringContaining("'clip.vision.n_wa_pattern'") }));
    expect(() => ggufBoolArray(h, 'clip.vision.image_mean')).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID', message: expect.stringContaining("'clip.vision.image_mean'") }));
    // A bool array whose third element is the byte 2: the reader refuses it as it does a lone bool.
    const bad = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0), u64(1), str('clip.vision.is_deepstack_layers'), u32(T.ARRAY), u32(T.BOOL), u64(4), Buffer.from([0, 1, 2, 0])]);
    const e = await refusal(bad);
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/is_deepstack_layers'\[2\]: bool byte 2 is neither 0 nor 1/);
    // An array claiming more bools than bytes left fails before any loop.
    const lying = Buffer.concat([Buffer.from('GGUF'), u32(3), u64(0), u64(1), str('k'), u32(T.ARRAY), u32(T.BOOL), u64(1 << 30), Buffer.from([0])]);
    expect((await refusal(lying)).code).toBe('ERR_WEIGHTS_CORRUPT');
  });
  it('a missing file → ERR_MODEL_NOT_FOUND; a tiny file → ERR_MODEL_FORMAT', async () => {
    expect((await refusal(join(dir, 'nope.gguf'))).code).toBe('ERR_MODEL_NOT_FOUND');
    expect((await refusal(Buffer.from('GG'))).code).toBe('ERR_MODEL_FORMAT');
  });
});

function u32(v: number) {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
}
function u64(v: number | bigint) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
}
function str(s: string) {
  return Buffer.concat([u64(Buffer.byteLength(s)), Buffer.from(s)]);
}
