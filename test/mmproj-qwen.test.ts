// llama.cpp mmproj files of the four Qwen towers (test/fixtures/<family>-tiny/mmproj/, written by llama.cpp's
// own converter from the HF fixture folders beside them) open as their family and encode like the HF folder:
//   - f32 / f16 / bf16 files: every stage of a fixture case against tessera's run of the HF folder, bit for bit
//     where the file holds the checkpoint's values in a type that computes alike (see SAME below), else within
//     the rounding of the stored type;
//   - q8_0 files: every stage within 1e-4 of HF transformers' own run holding the file's dequantised weights
//     (mmproj/q8_0-expected.safetensors, verify/hf-q8-reference.py), and of tessera's HF-layout tower holding them
//     (the dequantisation itself is gguf-py's, bit for bit: test/format-q8_0.test.ts);
//   - every residency bit-identical, CPU bf16 and metal-emulated against the HF folder on the same path;
//   - the refusals: an unknown projector, a language-model GGUF, a missing or misshapen tensor;
//   - Ollama's single Qwen2.5-VL and Qwen3-VL files, written here from the HF fixtures as Ollama's converters lay
//     them out.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';
import { inspectCommand } from '../src/cli/inspect.js';
import { buildQwen2FromGguf } from '../src/families/qwen2/spec.js';
import { buildQwen3FromGguf } from '../src/families/qwen3/spec.js';
import { readGgufHeader, type GgufHeader } from '../src/formats/gguf.js';
import { VisionTower, type EncodeResult } from '../src/index.js';
import { loadModel } from '../src/load-model.js';
import { addon } from '../src/native.js';
import { packModel } from '../src/pack/index.js';
import type { TowerSpec } from '../src/spec/types.js';
import { FIXTURES, qwenInput, readJson, readTensors, relErr } from './helpers/fixtures.js';
import { GGML, T, writeGguf } from './helpers/gguf-writer.js';

interface Tower {
  fixture: string;
  family: string;
  projector: string;
  files: string[];
  /** The fixture case encoded (the smallest). */
  case: string;
}

const TOWERS: Tower[] = [
  { fixture: 'qwen2_vl-tiny', family: 'qwen2_vl', projector: 'qwen2vl_merger', files: ['f32', 'f16', 'bf16', 'q8_0'], case: 'rocket_thin' },
  { fixture: 'qwen2_5_vl-tiny', family: 'qwen2_5_vl', projector: 'qwen2.5vl_merger', files: ['f32', 'f16', 'bf16', 'q8_0'], case: 'rocket_thin' },
  { fixture: 'qwen3_vl-tiny', family: 'qwen3_vl', projector: 'qwen3vl_merger', files: ['f16', 'bf16', 'q8_0'], case: 'tiny' },
  { fixture: 'qwen3_5-tiny', family: 'qwen3_5', projector: 'qwen3vl_merger', files: ['f32', 'f16', 'bf16', 'q8_0'], case: 'tiny' },
];

/** Unit roundoff of a stored type (half its relative spacing): what one rounding to it may change. */
const UNIT: Record<string, number> = { f32: 2 ** -24, f16: 2 ** -11, bf16: 2 ** -8 };
/**
 * A file whose matrices were rounded from the checkpoint's type to another: each weight moves by at most one
 * unit roundoff, and a stage of these shallow towers (2 to 4 blocks) by a small multiple of it.
 */
const roundingTol = (dtype: string) => 4 * UNIT[dtype]!;
const Q8_TOL = 1e-4;

const same = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
const ggufPath = (t: Tower, dtype: string) => join(FIXTURES, t.fixture, 'mmproj', `mmproj-${dtype}.gguf`);

/** The dtype of a spec's block matrices (rank >= 2), which decides how the linears compute. */
const matrixDtype = (spec: TowerSpec) => spec.stages.find((s) => s.kind === 'block')!.tensors.find((x) => x.shape.length >= 2)!.dtype;

/** Each stage's rel err against the reference run's, and which are bit-identical. */
function compare(ours: EncodeResult, ref: EncodeResult): { err: Record<string, number>; exact: string[] } {
  const err: Record<string, number> = {};
  const exact: string[] = [];
  expect(Object.keys(ours.stages!)).toEqual(Object.keys(ref.stages!));
  for (const [name, r] of Object.entries(ref.stages!)) {
    const o = ours.stages![name]!;
    err[name] = relErr(o, r);
    if (same(o, r)) exact.push(name);
  }
  return { err, exact };
}

/**
 * Writes an HF-layout copy of the fixture's tower whose tensors hold a GGUF tower's weights as its spec reads
 * them (pieces gathered, Q8_0 widened by the addon's conversion, which equals gguf-py's dequantize bit for
 * bit): the "HF tower with the dequantised weights" a Q8_0 file is compared with.
 */
async function dequantisedFolder(t: Tower, gguf: TowerSpec, out: string): Promise<void> {
  const hf = await loadModel(join(FIXTURES, t.fixture, 'model'));
  const file = readFileSync(gguf.files[0]!);
  const tensors: { name: string; dtype: string; shape: number[]; bytes: Buffer }[] = [];
  hf.spec.stages.forEach((stage, i) => {
    stage.tensors.forEach((ht, j) => {
      const gt = gguf.stages[i]!.tensors[j]!;
      expect(gt.role).toBe(ht.role);
      let bytes: Uint8Array = Buffer.concat((gt.pieces ?? [{ offset: gt.offset, length: gt.length }]).map((p) => file.subarray(p.offset, p.offset + p.length)));
      let dtype = gt.dtype;
      if (dtype === 'q8_0') (bytes = addon().convertDtype(bytes, 'q8_0', 'f32')), (dtype = 'f32');
      tensors.push({ name: ht.name, dtype: dtype.toUpperCase(), shape: ht.shape, bytes: Buffer.from(bytes) });
    });
  });
  // 4-byte tensors first and the header padded to 8 bytes (as safetensors' writer does): every tensor
  // lands aligned to its element size.
  tensors.sort((a, b) => (a.dtype === 'F32' ? 0 : 1) - (b.dtype === 'F32' ? 0 : 1));
  const header: Record<string, unknown> = {};
  let at = 0;
  for (const x of tensors) {
    header[x.name] = { dtype: x.dtype, shape: x.shape, data_offsets: [at, at + x.bytes.length] };
    at += x.bytes.length;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const json = Buffer.from(text);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  const blobs = tensors.map((x) => x.bytes);
  cpSync(join(FIXTURES, t.fixture, 'model', 'config.json'), join(out, 'config.json'));
  cpSync(join(FIXTURES, t.fixture, 'model', 'preprocessor_config.json'), join(out, 'preprocessor_config.json'));
  writeFileSync(join(out, 'model.safetensors'), Buffer.concat([len, json, ...blobs]));
}

describe.each(TOWERS)('$fixture: llama.cpp mmproj files', (t) => {
  const input = qwenInput(t.fixture, t.case);
  let hf: VisionTower;
  let hfRun: EncodeResult;
  let tmp: string;
  beforeAll(async () => {
    hf = await VisionTower.open(join(FIXTURES, t.fixture, 'model'), { backend: 'cpu' });
    hfRun = await hf.encodePixels(input, { stages: true });
    tmp = mkdtempSync(join(tmpdir(), 'tessera-mmproj-'));
  });
  afterAll(async () => {
    await hf?.close();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it.each(t.files)(`mmproj-%s.gguf opens as ${t.family} with the HF folder's dimensions and stages`, async (dtype) => {
    const g = await loadModel(ggufPath(t, dtype));
    expect(g.spec.family).toBe(t.family);
    expect(g.spec.source).toBe('gguf-llama.cpp');
    const { eps: _e1, ...dims } = g.spec.dims;
    const { eps: _e2, ...hfDims } = hf.spec.dims;
    expect(dims).toEqual(hfDims);
    expect(Math.fround(g.spec.dims['eps']!)).toBe(Math.fround(hf.spec.dims['eps']!)); // one f32 once narrowed
    expect(g.spec.lists).toEqual(hf.spec.lists);
    expect(g.spec.stages.map((s) => [s.name, s.tensors.map((x) => [x.role, x.shape])])).toEqual(
      hf.spec.stages.map((s) => [s.name, s.tensors.map((x) => [x.role, x.shape])]),
    );
    // The processor: the tower's own sizes, the file's normalisation, the class defaults' pixel budget.
    expect(g.preprocessorConfig).toMatchObject({ patch_size: hf.spec.dims['patch_size'], merge_size: hf.spec.dims['merge_size'], temporal_patch_size: 2 });
  });

  for (const dtype of t.files.filter((d) => d !== 'q8_0'))
    it(`mmproj-${dtype}.gguf: every stage as the HF folder's, bit for bit where the values compute alike, else within the stored type's rounding`, async () => {
      const g = await VisionTower.open(ggufPath(t, dtype), { backend: 'cpu', residency: 'resident' });
      try {
        const run = await g.encodePixels(input, { stages: true });
        const { err, exact } = compare(run, hfRun);
        const fileType = matrixDtype(g.spec), hfType = matrixDtype(hf.spec);
        if (fileType === hfType || fileType === 'f32') {
          // The checkpoint's values, the matrices in a type the linears compute alike: only the vectors and
          // the patch kernel are f32 where HF's are 16-bit, and both widen to f32 before use.
          expect(exact, JSON.stringify(err)).toEqual(Object.keys(hfRun.stages!));
        } else {
          const tol = roundingTol(fileType);
          for (const [name, e] of Object.entries(err)) expect(e, `stage ${name}`).toBeLessThan(tol);
        }
        expect(run.tokens).toBe(hfRun.tokens);
      } finally {
        await g.close();
      }
    });

  it(`mmproj-q8_0.gguf: every stage within ${Q8_TOL} of the HF tower holding its dequantised weights`, async () => {
    const g = await VisionTower.open(ggufPath(t, 'q8_0'), { backend: 'cpu', residency: 'resident' });
    try {
      expect(g.spec.stages.flatMap((s) => s.tensors).some((x) => x.dtype === 'q8_0')).toBe(true);
      await dequantisedFolder(t, g.spec, tmp);
      const ref = await VisionTower.open(tmp, { backend: 'cpu' });
      try {
        const { err } = compare(await g.encodePixels(input, { stages: true }), await ref.encodePixels(input, { stages: true }));
        for (const [name, e] of Object.entries(err)) expect(e, `stage ${name}`).toBeLessThan(Q8_TOL);
      } finally {
        await ref.close();
      }
    } finally {
      await g.close();
    }
  });

  it(`mmproj-q8_0.gguf: every stage within ${Q8_TOL} of HF transformers' own run holding the file's dequantised weights`, async () => {
    // q8_0-expected.safetensors: verify/hf-q8-reference.py (the file read and dequantised by gguf-py, its split
    // tensors joined, loaded into HF's model in place of the checkpoint's, run in fp32 on rocket_thin's pixels)
    const ref = readTensors(join(FIXTURES, t.fixture, 'mmproj', 'q8_0-expected.safetensors'));
    const g = await VisionTower.open(ggufPath(t, 'q8_0'), { backend: 'cpu' });
    try {
      const r = await g.encodePixels(qwenInput(t.fixture, 'rocket_thin'), { stages: true });
      expect(Object.keys(ref)).toContain('merged');
      for (const [name, want] of Object.entries(ref)) {
        expect(r.stages![name], `stage ${name}`).toBeDefined();
        expect(relErr(r.stages![name]!, want.f32()), `stage ${name}`).toBeLessThan(Q8_TOL);
      }
    } finally {
      await g.close();
    }
  });

  it('every residency gives the same bits (assembled and Q8_0 tensors included)', async () => {
    for (const dtype of ['bf16', 'q8_0']) {
      const runs: Float32Array[] = [];
      for (const residency of ['resident', 'mapped', 'stream'] as const) {
        const g = await VisionTower.open(ggufPath(t, dtype), { backend: 'cpu', residency, slots: 1 });
        try {
          runs.push((await g.encodePixels(input)).embeddings);
          runs.push((await g.encodePixels(input)).embeddings); // a second pass (stream: slots refilled)
        } finally {
          await g.close();
        }
      }
      for (const r of runs.slice(1)) expect(same(r, runs[0]!), `${dtype}`).toBe(true);
    }
  });

  it('a packed copy of the q8_0 file (its split tensors joined) encodes with the same bits', async () => {
    const g = await VisionTower.open(ggufPath(t, 'q8_0'), { backend: 'cpu' });
    const out = join(tmp, 'packed');
    try {
      await packModel(await loadModel(ggufPath(t, 'q8_0')), out);
      const p = await VisionTower.open(out, { backend: 'cpu' });
      try {
        expect(same((await p.encodePixels(input)).embeddings, (await g.encodePixels(input)).embeddings)).toBe(true);
      } finally {
        await p.close();
      }
    } finally {
      await g.close();
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('CPU bf16: the bf16 file as the HF folder on the same path', async () => {
    const a = await VisionTower.open(ggufPath(t, 'bf16'), { backend: 'cpu', precision: 'bf16' });
    const b = await VisionTower.open(join(FIXTURES, t.fixture, 'model'), { backend: 'cpu', precision: 'bf16' });
    try {
      expect(a.info.precision).toBe(b.info.precision);
      const { err, exact } = compare(await a.encodePixels(input, { stages: true }), await b.encodePixels(input, { stages: true }));
      // With bf16 operands both towers round every weight to bf16 as the converter did (nearest even): the
      // same operands, the same bits. A CPU without bf16 runs f32, where a checkpoint of the other 16-bit type
      // (Qwen3-VL's f16) differs by the file's bf16 rounding.
      if (a.info.precision === 'bf16' || matrixDtype(a.spec) === matrixDtype(b.spec)) expect(exact, JSON.stringify(err)).toEqual(Object.keys(err));
      else for (const [name, e] of Object.entries(err)) expect(e, `stage ${name}`).toBeLessThan(roundingTol('bf16'));
    } finally {
      await a.close();
      await b.close();
    }
  });
});

// The Metal backend's kernels on the MSL emulator (clang >= 15; Debian: clang-19).
const emu = await build({ quiet: true });
describe.skipIf(!emu.available)(`mmproj files on metal-emulated${emu.available ? '' : ` (skipped: ${emu.reason})`}`, () => {
  it.each(TOWERS)('$fixture: the bf16 file as the HF folder, the q8_0 file as its dequantised HF tower', async (t) => {
    const input = qwenInput(t.fixture, t.case);
    const tmp = mkdtempSync(join(tmpdir(), 'tessera-mmproj-emu-'));
    const open = (path: string) => VisionTower.open(path, { backend: 'metal-emulated' });
    const towers: VisionTower[] = [];
    try {
      const [hf, bf16, q8] = await Promise.all([open(join(FIXTURES, t.fixture, 'model')), open(ggufPath(t, 'bf16')), open(ggufPath(t, 'q8_0'))]);
      towers.push(hf, bf16, q8);
      expect(bf16.info.backend).toBe('metal-emulated');
      await dequantisedFolder(t, q8.spec, tmp);
      const deq = await open(tmp);
      towers.push(deq);
      const run = (tw: VisionTower) => tw.encodePixels(input, { stages: true });
      const b = compare(await run(bf16), await run(hf));
      const q = compare(await run(q8), await run(deq));
      const tol = matrixDtype(bf16.spec) === matrixDtype(hf.spec) ? 0 : roundingTol('bf16');
      for (const [name, e] of Object.entries(b.err)) expect(e, `bf16 stage ${name}`).toBeLessThanOrEqual(tol);
      for (const [name, e] of Object.entries(q.err)) expect(e, `q8_0 stage ${name}`).toBeLessThan(Q8_TOL);
    } finally {
      await Promise.all(towers.map((tw) => tw.close()));
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 300_000);
});

describe('refusals', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-mmproj-bad-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, kv: Parameters<typeof writeGguf>[0]['kv'], tensors: Parameters<typeof writeGguf>[0]['tensors'] = []) => {
    const p = join(dir, name);
    writeFileSync(p, writeGguf({ kv, tensors }));
    return p;
  };
  const str = (key: string, value: string) => ({ key, type: T.STRING, value });

  it('an unknown projector type names itself and the supported ones', async () => {
    const p = write('odd.gguf', [str('general.architecture', 'clip'), str('clip.projector_type', 'qwen9vl_merger')]);
    const e = await loadModel(p).catch((x: unknown) => x);
    expect(e).toMatchObject({ code: 'ERR_MODEL_FORMAT' });
    for (const want of ['qwen9vl_merger', 'qwen2vl_merger', 'qwen2.5vl_merger', 'qwen3vl_merger', 'gemma4v']) expect(String((e as Error).message)).toContain(want);
  });

  it("a language model's GGUF says so and asks for the mmproj file", async () => {
    const p = write('lm.gguf', [str('general.architecture', 'qwen2vl')], [{ name: 'token_embd.weight', ne: [4, 2], type: GGML.F32, data: new Uint8Array(32) }]);
    await expect(loadModel(p)).rejects.toMatchObject({ code: 'ERR_MODEL_FORMAT', message: expect.stringMatching(/language-model GGUF.*'qwen2vl'.*mmproj/) });
  });

  const edited = async (t: Tower, edit: (h: GgufHeader) => void): Promise<GgufHeader> => {
    const h = await readGgufHeader(ggufPath(t, 'f16'));
    const copy: GgufHeader = { ...h, metadata: new Map(h.metadata), tensors: new Map([...h.tensors].map(([k, v]) => [k, { ...v, ne: [...v.ne] }])) };
    edit(copy);
    return copy;
  };

  it('a missing tensor is named', async () => {
    const qwen2 = TOWERS[0]!, qwen3 = TOWERS[2]!;
    const noV = await edited(qwen2, (h) => h.tensors.delete('v.blk.1.attn_v.weight'));
    expect(() => buildQwen2FromGguf(noV)).toThrow(expect.objectContaining({ code: 'ERR_TENSOR_MISSING', message: expect.stringContaining("'v.blk.1.attn_v.weight'") }));
    const noStep = await edited(qwen2, (h) => h.tensors.delete('v.patch_embd.weight.1'));
    expect(() => buildQwen2FromGguf(noStep)).toThrow(expect.objectContaining({ code: 'ERR_TENSOR_MISSING', message: expect.stringContaining("'v.patch_embd.weight.1'") }));
    const noDeep = await edited(qwen3, (h) => h.tensors.delete('v.deepstack.2.fc1.weight'));
    expect(() => buildQwen3FromGguf(noDeep)).toThrow(expect.objectContaining({ code: 'ERR_TENSOR_MISSING', message: expect.stringContaining("'v.deepstack.2.fc1.weight'") }));
  });

  it('a misshapen tensor is named with the shape it needs', async () => {
    const bad = await edited(TOWERS[1]!, (h) => {
      const t = h.tensors.get('v.blk.2.attn_k.weight')!;
      t.ne = [t.ne[0]!, t.ne[1]! / 2];
      t.length /= 2;
    });
    expect(() => buildQwen2FromGguf(bad)).toThrow(
      expect.objectContaining({ code: 'ERR_TENSOR_SHAPE', message: expect.stringMatching(/'v\.blk\.2\.attn_k\.weight' has shape \[24, 48\], expected \[48, 48\]/) }),
    );
    const badMerge = await edited(TOWERS[3]!, (h) => h.metadata.set('clip.vision.spatial_merge_size', 3));
    expect(() => buildQwen3FromGguf(badMerge)).toThrow(expect.objectContaining({ code: 'ERR_TENSOR_SHAPE', message: expect.stringContaining('spatial_merge_size is 3') }));
  });

  it('parts of one joined tensor in different types are refused, naming both', async () => {
    const mixed = await edited(TOWERS[1]!, (h) => {
      const v = h.tensors.get('v.blk.0.attn_v.weight')!;
      h.tensors.set(v.name, { ...v, type: GGML.Q8_0, typeName: 'Q8_0', length: (v.ne[0]! * v.ne[1]! * 34) / 32 });
    });
    expect(() => buildQwen2FromGguf(mixed)).toThrow(
      expect.objectContaining({ code: 'ERR_MODEL_FORMAT', message: expect.stringMatching(/'v\.blk\.0\.attn_v\.weight' is Q8_0, 'v\.blk\.0\.attn_q\.weight' F16/) }),
    );
  });

  it('an older Qwen2.5-VL file (qwen2vl_merger with its gated MLP) opens as Qwen2.5-VL', async () => {
    const old = await edited(TOWERS[1]!, (h) => {
      h.metadata.set('clip.projector_type', 'qwen2vl_merger');
      h.metadata.delete('clip.use_silu');
    });
    const spec = buildQwen2FromGguf(old);
    expect(spec.family).toBe('qwen2_5_vl');
    expect(spec.lists['fullatt_blocks']).toEqual([1]);
    // Its full-attention list as stated (in place of n_wa_pattern), checked against the depth.
    const list = (values: number[]) => ({ kind: 'array' as const, elementType: T.I32, length: values.length, values });
    const stated = await edited(TOWERS[1]!, (h) => {
      h.metadata.set('clip.projector_type', 'qwen2vl_merger');
      h.metadata.delete('clip.vision.n_wa_pattern');
      h.metadata.set('clip.vision.fullatt_block_indexes', list([0, 2]));
    });
    expect(buildQwen2FromGguf(stated).lists['fullatt_blocks']).toEqual([0, 2]);
    stated.metadata.set('clip.vision.fullatt_block_indexes', list([0, 3]));
    expect(() => buildQwen2FromGguf(stated)).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID', message: expect.stringContaining('not a block (depth 3)') }));
    // A Qwen2-VL file (no gate, no such keys) stays Qwen2-VL: no window, every block over the whole image.
    const v2 = buildQwen2FromGguf(await readGgufHeader(ggufPath(TOWERS[0]!, 'f16')));
    expect([v2.family, v2.dims['window'], v2.lists['fullatt_blocks']]).toEqual(['qwen2_vl', 0, []]);
  });
});

describe('tessera inspect', () => {
  it.each(TOWERS)('$fixture q8_0: family, projector type, tensor types and memory per residency', async (t) => {
    const out: string[] = [];
    const code = await inspectCommand([ggufPath(t, 'q8_0')], { out: (s: string) => out.push(s), err: (s: string) => out.push(s) } as never);
    const text = out.join('\n');
    expect(code, text).toBe(0);
    expect(text).toContain(`${t.family} (gguf-llama.cpp)`);
    expect(text).toContain(`projector ${t.projector}`);
    expect(text).toMatch(/tensor types\s+.*Q8_0 x \d+/);
    expect(text).toMatch(/resident\s+\S+/);
    expect(text).toMatch(/stream\s+\S+/);
    expect(text).toMatch(/mapped\s+.*held/);
  });
});

// Ollama's single Qwen2.5-VL file (general.architecture qwen25vl): written here from the HF fixture as Ollama's
// converter (convert/convert_qwen25vl.go over convert_qwen2.go) writes one: its name replacements, the patch
// kernel split into patch_embd_0 / _1 along the time axis, qkv split into attn_q / k / v along the rows, the
// vision keys under qwen25vl.vision.*, and a text model beside (here one Q4_0 tensor, never read).
describe("Ollama's single Qwen2.5-VL file", () => {
  const REPLACEMENTS: [string, string][] = [
    ['mlp.down_proj', 'ffn_down'], ['mlp.gate_proj', 'ffn_gate'], ['mlp.up_proj', 'ffn_up'],
    ['visual', 'v'], ['blocks', 'blk'], ['attn.proj', 'attn_out'], ['norm1', 'ln1'], ['norm2', 'ln2'],
  ];
  const rename = (hfName: string) => REPLACEMENTS.reduce((n, [from, to]) => n.split(from).join(to), hfName.replace(/^model\./, ''));
  let dir: string;
  let path: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-ollama-'));
    path = join(dir, 'qwen25vl.gguf');
    const hf = await loadModel(join(FIXTURES, 'qwen2_5_vl-tiny', 'model'));
    const tensors: Parameters<typeof writeGguf>[0]['tensors'] = [];
    for (const t of hf.spec.stages.flatMap((s) => s.tensors)) {
      // Ollama's converter keeps BF16 only outside the tower: its matrices become F16, its vectors F32.
      expect(t.dtype).toBe('bf16');
      const to = t.shape.length >= 2 ? 'f16' : 'f32';
      const type = to === 'f16' ? GGML.F16 : GGML.F32;
      const bytes = Buffer.from(addon().convertDtype(readFileSync(hf.spec.files[t.file]!).subarray(t.offset, t.offset + t.length), 'bf16', to));
      const ne = (shape: number[]) => [...shape].reverse();
      if (t.role === 'patch_embed.proj.weight') {
        const [D, C, Tt, P] = t.shape as [number, number, number, number];
        const plane = P * P * 2; // f16
        for (let step = 0; step < Tt; step++) {
          const out = Buffer.alloc(D * C * plane);
          for (let dc = 0; dc < D * C; dc++) bytes.copy(out, dc * plane, (dc * Tt + step) * plane, (dc * Tt + step + 1) * plane);
          tensors.push({ name: rename(t.name).replace('patch_embed.proj', `patch_embd_${step}`), ne: ne([D, C, P, P]), type, data: out });
        }
      } else if (t.role.startsWith('attn.qkv.')) {
        const third = bytes.length / 3;
        ['attn_q', 'attn_k', 'attn_v'].forEach((q, i) =>
          tensors.push({ name: rename(t.name).replace('attn.qkv', q), ne: ne([t.shape[0]! / 3, ...t.shape.slice(1)]), type, data: bytes.subarray(i * third, (i + 1) * third) }),
        );
      } else tensors.push({ name: rename(t.name), ne: ne(t.shape), type, data: bytes });
    }
    tensors.push({ name: 'token_embd.weight', ne: [32, 2], type: GGML.Q4_0, data: new Uint8Array(36) });
    const u32 = (key: string, value: number) => ({ key: `qwen25vl.vision.${key}`, type: T.U32, value });
    const v = hf.spec.dims;
    writeFileSync(
      path,
      writeGguf({
        kv: [
          { key: 'general.architecture', type: T.STRING, value: 'qwen25vl' },
          u32('block_count', v['depth']!), u32('embedding_length', v['hidden']!), u32('attention.head_count', v['heads']!),
          u32('num_channels', 3), u32('patch_size', v['patch_size']!), u32('spatial_merge_size', v['merge_size']!),
          u32('spatial_patch_size', v['patch_size']!), u32('window_size', 112), u32('temporal_patch_size', 2),
          { key: 'qwen25vl.vision.attention.layer_norm_epsilon', type: T.F32, value: 1e-6 },
          { key: 'qwen25vl.vision.rope.freq_base', type: T.F32, value: 10000 },
          { key: 'qwen25vl.vision.fullatt_block_indexes', type: T.ARRAY, elementType: T.I32, value: hf.spec.lists['fullatt_blocks']! },
        ],
        tensors,
      }),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('opens as Qwen2.5-VL (gguf-ollama) and encodes as the HF folder within f16 rounding, the same bits in every residency', async () => {
    const input = qwenInput('qwen2_5_vl-tiny', 'rocket_thin');
    const hf = await VisionTower.open(join(FIXTURES, 'qwen2_5_vl-tiny', 'model'), { backend: 'cpu' });
    try {
      const ref = await hf.encodePixels(input, { stages: true });
      let first: Float32Array | undefined;
      for (const residency of ['resident', 'mapped', 'stream'] as const) {
        const g = await VisionTower.open(path, { backend: 'cpu', residency });
        try {
          expect([g.info.family, g.info.source]).toEqual(['qwen2_5_vl', 'gguf-ollama']);
          expect({ ...g.spec.dims, eps: Math.fround(g.spec.dims['eps']!) }).toEqual({ ...hf.spec.dims, eps: Math.fround(hf.spec.dims['eps']!) });
          expect(g.spec.lists).toEqual(hf.spec.lists);
          const r = await g.encodePixels(input, { stages: true });
          // The bf16 checkpoint's matrices rounded to f16 (small weights lose bits as f16 subnormals).
          for (const [name, e] of Object.entries(compare(r, ref).err)) expect(e, `${residency} stage ${name}`).toBeLessThan(roundingTol('f16'));
          if (first) expect(same(r.embeddings, first), residency).toBe(true);
          first ??= r.embeddings;
        } finally {
          await g.close();
        }
      }
    } finally {
      await hf.close();
    }
  });

  it("a qwen25vl file without its vision tower is refused; a missing or empty full-attention list is Ollama's default [7, 15, 23, 31]", async () => {
    const h = await readGgufHeader(path);
    const textOnly: GgufHeader = { ...h, tensors: new Map([...h.tensors].filter(([n]) => !n.startsWith('v.'))) };
    expect(() => buildQwen2FromGguf(textOnly)).toThrow(expect.objectContaining({ code: 'ERR_MODEL_FORMAT', message: expect.stringContaining('no vision tower') }));
    // The default is checked against the depth like a stated list: this 3-block tower has no block 7.
    const noList: GgufHeader = { ...h, metadata: new Map(h.metadata) };
    noList.metadata.delete('qwen25vl.vision.fullatt_block_indexes');
    const emptyList: GgufHeader = { ...h, metadata: new Map(h.metadata) };
    emptyList.metadata.set('qwen25vl.vision.fullatt_block_indexes', { kind: 'array', elementType: T.I32, length: 0, values: [] });
    for (const header of [noList, emptyList])
      expect(() => buildQwen2FromGguf(header)).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID', message: expect.stringContaining('full-attention block 7 is not a block (depth 3)') }));
  });
});

// Ollama's single Qwen3-VL file (general.architecture qwen3vl), written from the HF fixture as convert_qwen3vl.go
// writes one: HF's names with its replacements, qkv split into attn_q / k / v, the patch kernel whole as
// [D·C, T, P, P], deepstack mergers by their own number, the vision keys (the processor's among them) under
// qwen3vl.vision.*.
describe("Ollama's single Qwen3-VL file", () => {
  const REPLACEMENTS: [string, string][] = [
    ['model.visual', 'v'], ['patch_embed.proj', 'patch_embed'], ['blocks', 'blk'], ['attn.qkv', 'attn_qkv'],
    ['attn.proj', 'attn_out'], ['deepstack_merger_list', 'deepstack_merger'],
  ];
  const rename = (hfName: string) => REPLACEMENTS.reduce((n, [from, to]) => n.split(from).join(to), hfName);
  let dir: string;
  let path: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-ollama3-'));
    path = join(dir, 'qwen3vl.gguf');
    const hf = await loadModel(join(FIXTURES, 'qwen3_vl-tiny', 'model'));
    const tensors: Parameters<typeof writeGguf>[0]['tensors'] = [];
    for (const t of hf.spec.stages.flatMap((s) => s.tensors)) {
      // The f16 checkpoint's matrices stay F16 in Ollama's file; its vectors become F32.
      expect(t.dtype).toBe('f16');
      const to = t.shape.length >= 2 ? 'f16' : 'f32';
      const type = to === 'f16' ? GGML.F16 : GGML.F32;
      const bytes = Buffer.from(addon().convertDtype(readFileSync(hf.spec.files[t.file]!).subarray(t.offset, t.offset + t.length), 'f16', to));
      const ne = (shape: number[]) => [...shape].reverse();
      if (t.role === 'patch_embed.proj.weight') {
        const [D, C, ...rest] = t.shape as [number, number, number, number, number];
        tensors.push({ name: rename(t.name), ne: ne([D * C, ...rest]), type, data: bytes });
      } else if (t.role.startsWith('attn.qkv.')) {
        const third = bytes.length / 3;
        ['attn_q', 'attn_k', 'attn_v'].forEach((q, i) =>
          tensors.push({ name: rename(t.name).replace('attn_qkv', q), ne: ne([t.shape[0]! / 3, ...t.shape.slice(1)]), type, data: bytes.subarray(i * third, (i + 1) * third) }),
        );
      } else tensors.push({ name: rename(t.name), ne: ne(t.shape), type, data: bytes });
    }
    tensors.push({ name: 'token_embd.weight', ne: [32, 2], type: GGML.Q4_0, data: new Uint8Array(36) });
    const pre = readJson<Record<string, any>>(join(FIXTURES, 'qwen3_vl-tiny', 'model', 'preprocessor_config.json'));
    const u32 = (key: string, value: number) => ({ key: `qwen3vl.vision.${key}`, type: T.U32, value });
    const f32s = (key: string, value: number[]) => ({ key: `qwen3vl.vision.${key}`, type: T.ARRAY, elementType: T.F32, value });
    const v = hf.spec.dims;
    writeFileSync(
      path,
      writeGguf({
        kv: [
          { key: 'general.architecture', type: T.STRING, value: 'qwen3vl' },
          u32('block_count', v['depth']!), u32('embedding_length', v['hidden']!), u32('attention.head_count', v['heads']!),
          u32('num_channels', 3), u32('patch_size', v['patch_size']!), u32('spatial_merge_size', v['merge_size']!), u32('temporal_patch_size', 2),
          { key: 'qwen3vl.vision.attention.layer_norm_epsilon', type: T.F32, value: 1e-6 },
          { key: 'qwen3vl.vision.rope.freq_base', type: T.F32, value: 10000 },
          { key: 'qwen3vl.vision.deepstack_visual_indexes', type: T.ARRAY, elementType: T.I32, value: hf.spec.lists['deepstack_indexes']! },
          u32('shortest_edge', pre['size'].shortest_edge), u32('longest_edge', pre['size'].longest_edge),
          f32s('image_mean', pre['image_mean']), f32s('image_std', pre['image_std']),
        ] as Parameters<typeof writeGguf>[0]['kv'],
        tensors,
      }),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('opens as Qwen3-VL (gguf-ollama) with the file\'s processor settings, and encodes as the HF folder, bit for bit, in every residency', async () => {
    const input = qwenInput('qwen3_vl-tiny', 'tiny');
    const hf = await VisionTower.open(join(FIXTURES, 'qwen3_vl-tiny', 'model'), { backend: 'cpu' });
    try {
      const ref = await hf.encodePixels(input, { stages: true });
      for (const residency of ['resident', 'mapped', 'stream'] as const) {
        const g = await VisionTower.open(path, { backend: 'cpu', residency });
        try {
          expect([g.info.family, g.info.source]).toEqual(['qwen3_vl', 'gguf-ollama']);
          expect({ ...g.spec.dims, eps: Math.fround(g.spec.dims['eps']!) }).toEqual({ ...hf.spec.dims, eps: Math.fround(hf.spec.dims['eps']!) });
          expect(g.spec.lists).toEqual(hf.spec.lists);
          expect(g.preprocessorConfig).toMatchObject({ size: hf.preprocessorConfig!['size'] });
          const r = await g.encodePixels(input, { stages: true });
          const { exact, err } = compare(r, ref);
          expect(exact, `${residency}: ${JSON.stringify(err)}`).toEqual(Object.keys(ref.stages!));
          expect(r.deepstack?.length).toBe(2);
        } finally {
          await g.close();
        }
      }
    } finally {
      await hf.close();
    }
  });
});
