// Ollama's single Qwen3.5 file (general.architecture qwen35; qwen35moe for the MoE), written here from the HF
// fixture as Ollama's converter writes one (convert/convert_qwen3next.go, which converts Qwen3.5): HF's names
// with its replacements (`model.visual` as `v`, `blocks` as `blk`, `attn.proj` as `attn_out`, the patch
// kernel's `patch_embed.proj` as `patch_embed`), qkv split into attn_q / k / v along the rows, the patch kernel
// whole as [D·C, T, P, P], the tensor kinds its reader gives (F32 for vectors and biases, F16 for every other
// `v.` tensor: it keeps BF16 only outside `v.`), the vision keys under qwen35.vision.* (deepstack list empty),
// and a text model beside (one Q4_0 tensor, never read).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';
import { inspectCommand } from '../src/cli/inspect.js';
import { buildQwen3FromGguf } from '../src/families/qwen3/spec.js';
import { readGgufHeader, type GgufHeader } from '../src/formats/gguf.js';
import { VisionTower, type EncodeResult } from '../src/index.js';
import { loadModel } from '../src/load-model.js';
import { addon } from '../src/native.js';
import { FIXTURES, qwenInput, readJson, relErr } from './helpers/fixtures.js';
import { GGML, T, writeGguf } from './helpers/gguf-writer.js';

const FIXTURE = 'qwen3_5-tiny';
const HF = join(FIXTURES, FIXTURE, 'model');
const REPLACEMENTS: [string, string][] = [
  ['model.visual', 'v'], ['patch_embed.proj', 'patch_embed'], ['blocks', 'blk'], ['attn.qkv', 'attn_qkv'], ['attn.proj', 'attn_out'],
];
const rename = (hfName: string) => REPLACEMENTS.reduce((n, [from, to]) => n.split(from).join(to), hfName);
/** The bf16 checkpoint's matrices written F16 move each weight by at most f16's unit roundoff (relative). */
const F16_TOL = 4 * 2 ** -11;

const same = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

function expectStages(ours: EncodeResult, ref: EncodeResult): void {
  expect(Object.keys(ours.stages!)).toEqual(Object.keys(ref.stages!));
  for (const [name, r] of Object.entries(ref.stages!)) expect(relErr(ours.stages![name]!, r), `stage ${name}`).toBeLessThan(F16_TOL);
  expect(ours.tokens).toBe(ref.tokens);
}

/** The fixture's tower as Ollama's Qwen3.5 file; `kv` edits the keys. */
async function ollamaQwen35(path: string, kv: (list: Parameters<typeof writeGguf>[0]['kv']) => Parameters<typeof writeGguf>[0]['kv'] = (l) => l, withTower = true): Promise<void> {
  const hf = await loadModel(HF);
  const tensors: Parameters<typeof writeGguf>[0]['tensors'] = [];
  const ne = (shape: number[]) => [...shape].reverse();
  for (const t of withTower ? hf.spec.stages.flatMap((s) => s.tensors) : []) {
    expect(t.dtype).toBe('bf16');
    const bf16 = readFileSync(hf.spec.files[t.file]!).subarray(t.offset, t.offset + t.length);
    const vector = t.shape.length === 1 || t.role.endsWith('.bias');
    const data = addon().convertDtype(bf16, 'bf16', vector ? 'f32' : 'f16');
    const type = vector ? GGML.F32 : GGML.F16;
    if (t.role === 'patch_embed.proj.weight') {
      const [D, C, ...rest] = t.shape as [number, number, number, number, number];
      tensors.push({ name: rename(t.name), ne: ne([D * C, ...rest]), type, data });
    } else if (t.role.startsWith('attn.qkv.')) {
      const third = data.length / 3;
      ['attn_q', 'attn_k', 'attn_v'].forEach((q, i) =>
        tensors.push({ name: rename(t.name).replace('attn_qkv', q), ne: ne([t.shape[0]! / 3, ...t.shape.slice(1)]), type, data: data.subarray(i * third, (i + 1) * third) }),
      );
    } else tensors.push({ name: rename(t.name), ne: ne(t.shape), type, data });
  }
  tensors.push({ name: 'token_embd.weight', ne: [32, 2], type: GGML.Q4_0, data: new Uint8Array(36) });
  const pre = readJson<Record<string, any>>(join(HF, 'preprocessor_config.json'));
  const u32 = (key: string, value: number) => ({ key: `qwen35.vision.${key}`, type: T.U32, value });
  const f32s = (key: string, value: number[]) => ({ key: `qwen35.vision.${key}`, type: T.ARRAY, elementType: T.F32, value });
  const v = hf.spec.dims;
  const keys = [
    { key: 'general.architecture', type: T.STRING, value: 'qwen35' },
    { key: 'qwen35.block_count', type: T.U32, value: 1 },
    { key: 'qwen35.embedding_length', type: T.U32, value: v['out_hidden']! },
    ...(withTower
      ? [
          u32('block_count', v['depth']!), u32('embedding_length', v['hidden']!), u32('attention.head_count', v['heads']!),
          u32('num_channels', 3), u32('patch_size', v['patch_size']!), u32('spatial_merge_size', v['merge_size']!), u32('temporal_patch_size', 2),
          { key: 'qwen35.vision.attention.layer_norm_epsilon', type: T.F32, value: 1e-6 },
          { key: 'qwen35.vision.rope.freq_base', type: T.F32, value: 10000 },
          { key: 'qwen35.vision.deepstack_visual_indexes', type: T.ARRAY, elementType: T.I32, value: [] },
          u32('shortest_edge', pre['size'].shortest_edge), u32('longest_edge', pre['size'].longest_edge),
          f32s('image_mean', pre['image_mean']), f32s('image_std', pre['image_std']),
        ]
      : []),
  ] as Parameters<typeof writeGguf>[0]['kv'];
  writeFileSync(path, writeGguf({ kv: kv(keys), tensors }));
}

describe("Ollama's single Qwen3.5 file", () => {
  const input = qwenInput(FIXTURE, 'tiny');
  let dir: string;
  let path: string;
  let hf: VisionTower;
  let ref: EncodeResult;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-ollama35-'));
    path = join(dir, 'qwen35.gguf');
    await ollamaQwen35(path);
    hf = await VisionTower.open(HF, { backend: 'cpu' });
    ref = await hf.encodePixels(input, { stages: true });
  });
  afterAll(async () => {
    await hf?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('opens as Qwen3.5 (gguf-ollama) with the HF folder\'s dimensions and the file\'s processor settings, reading only v.* tensors', async () => {
    const g = await loadModel(path);
    expect([g.spec.family, g.spec.source]).toEqual(['qwen3_5', 'gguf-ollama']);
    expect({ ...g.spec.dims, eps: Math.fround(g.spec.dims['eps']!) }).toEqual({ ...hf.spec.dims, eps: Math.fround(hf.spec.dims['eps']!) });
    expect(g.spec.lists).toEqual(hf.spec.lists);
    expect(g.spec.stages.map((s) => [s.name, s.tensors.map((x) => [x.role, x.shape])])).toEqual(hf.spec.stages.map((s) => [s.name, s.tensors.map((x) => [x.role, x.shape])]));
    for (const x of g.spec.stages.flatMap((s) => s.tensors)) for (const part of x.name.split(' + ')) expect(part).toMatch(/^v\./);
    expect(g.preprocessorConfig).toMatchObject({ size: hf.preprocessorConfig!['size'], image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] });
  });

  it("encodes as the HF folder within f16's rounding, with the same bits in every residency", async () => {
    const runs: Float32Array[] = [];
    for (const residency of ['resident', 'mapped', 'stream'] as const) {
      const g = await VisionTower.open(path, { backend: 'cpu', residency, slots: 1 });
      try {
        const r = await g.encodePixels(input, { stages: true });
        expectStages(r, ref);
        runs.push(r.embeddings, (await g.encodePixels(input)).embeddings); // a second pass (stream: slots refilled)
      } finally {
        await g.close();
      }
    }
    for (const r of runs.slice(1)) expect(same(r, runs[0]!)).toBe(true);
  });

  it('tessera inspect names the family and the Ollama source', async () => {
    const out: string[] = [];
    const code = await inspectCommand([path], { out: (s: string) => out.push(s), err: (s: string) => out.push(s) } as never);
    const text = out.join('\n');
    expect(code, text).toBe(0);
    expect(text).toContain('qwen3_5 (gguf-ollama)');
    expect(text).toMatch(/tensor types\s+.*F16 x \d+/);
  });

  it('a qwen35 file without its tower says so; one listing deepstack blocks is refused', async () => {
    const textOnly = join(dir, 'qwen35-text.gguf');
    await ollamaQwen35(textOnly, undefined, false);
    await expect(loadModel(textOnly)).rejects.toMatchObject({ code: 'ERR_MODEL_FORMAT', message: expect.stringContaining('this qwen35 GGUF holds no vision tower') });
    const h = await readGgufHeader(path);
    const deep: GgufHeader = { ...h, metadata: new Map(h.metadata) };
    deep.metadata.set('qwen35.vision.deepstack_visual_indexes', { kind: 'array', elementType: T.I32, length: 1, values: [1] });
    expect(() => buildQwen3FromGguf(deep)).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID', message: expect.stringContaining('no deepstack mergers') }));
  });
});

// The Metal backend's kernels on the MSL emulator (clang >= 15; Debian: clang-19).
const emu = await build({ quiet: true });
describe.skipIf(!emu.available)(`Ollama's Qwen3.5 file on metal-emulated${emu.available ? '' : ` (skipped: ${emu.reason})`}`, () => {
  it('encodes as the HF folder on the same backend', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-ollama35-emu-'));
    const path = join(dir, 'qwen35.gguf');
    try {
      await ollamaQwen35(path);
      const input = qwenInput(FIXTURE, 'tiny');
      const [a, b] = await Promise.all([VisionTower.open(path, { backend: 'metal-emulated' }), VisionTower.open(HF, { backend: 'metal-emulated' })]);
      try {
        expect(a.info.backend).toBe('metal-emulated');
        expectStages(await a.encodePixels(input, { stages: true }), await b.encodePixels(input, { stages: true }));
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
