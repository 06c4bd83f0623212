// Gemma 4 TowerSpec builders (src/families/gemma4/spec.ts) for the three sources, their refusals (through
// VisionTower.open: they happen before the addon is touched), and a fuzz smoke test of the GGUF
// reader + builder. Numerics are in model-gemma4-tower.test.ts.
import { seededRandom } from './helpers/fixtures.js';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { TesseraError } from '../src/errors.js';
import { readGgufHeader } from '../src/formats/gguf.js';
import { buildGemma4FromGguf } from '../src/families/gemma4/spec.js';
import { loadModel } from '../src/load-model.js';
import type { TowerSpec } from '../src/spec/types.js';
import { VisionTower } from '../src/tower.js';
import { GEMMA4_MMPROJ, GEMMA4_MODEL, ollamaGgufFromFolder, type OllamaOptions } from './helpers/gemma4-fixtures.js';
import { GGML } from './helpers/gguf-writer.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-g4spec-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const save = (b: Buffer) => {
  const p = join(dir, `m${n++}.gguf`);
  writeFileSync(p, b);
  return p;
};
const ollama = (o: OllamaOptions) => save(ollamaGgufFromFolder(o));

async function refused(path: string): Promise<TesseraError> {
  const e = await VisionTower.open(path, { backend: 'cpu' }).then(
    async (t) => {
      await t.close();
      return null;
    },
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(TesseraError);
  return e as TesseraError;
}

const roles = (s: TowerSpec, stage: string) => s.stages.find((x) => x.name === stage)!.tensors.map((t) => t.role).sort();

describe('Gemma 4 spec: the three sources', () => {
  it('HF folder: dims, stages, clamps and standardisation as the checkpoint has them', async () => {
    const { spec } = await loadModel(GEMMA4_MODEL);
    expect(spec.family).toBe('gemma4');
    expect(spec.source).toBe('hf-folder');
    expect(spec.dims).toMatchObject({
      hidden: 64, heads: 4, head_dim: 16, intermediate: 128, out_hidden: 96, depth: 3, eps: 1e-6, patch_size: 16,
      pooling_kernel: 3, pos_rows: 1024, rope_theta: 100, standardize: 1, patch_kernel_chw: 0, max_soft_tokens: 70,
    });
    expect(spec.stages.map((s) => s.name)).toEqual(['embed', 'block.0', 'block.1', 'block.2', 'pooled', 'projected']);
    const b1 = spec.stages[2]!.tensors;
    expect(b1.length).toBe(4 + 7 + 2 + 28);
    expect(b1.find((t) => t.role === 'mlp.down_proj.output_max')).toMatchObject({ shape: [], dtype: 'f32', length: 4 });
    expect(roles(spec, 'pooled')).toEqual(['std_bias', 'std_scale']);
    expect(roles(spec, 'projected')).toEqual(['embedding_projection.weight']);
    // Roles are the checkpoint's names under each stage's base (docs/design.md#weight-names).
    for (const t of spec.stages.flatMap((s) => s.tensors)) expect(t.name.endsWith(`.${t.role}`), t.name).toBe(true);
    // Text-model tensors in the checkpoint are not part of the tower.
    expect(spec.stages.flatMap((s) => s.tensors).some((t) => t.name.includes('language_model'))).toBe(false);
  });

  it('llama.cpp mmproj: the same tower with the conv-shaped kernel flagged', async () => {
    const hf = (await loadModel(GEMMA4_MODEL)).spec;
    const { spec } = await loadModel(GEMMA4_MMPROJ);
    expect(spec.source).toBe('gguf-llama.cpp');
    expect(spec.dims).toMatchObject({ ...hf.dims, eps: Math.fround(1e-6), patch_kernel_chw: 1, max_soft_tokens: 280 });
    expect(spec.stages.map((s) => s.name)).toEqual(hf.stages.map((s) => s.name));
    for (const s of hf.stages) expect(roles(spec, s.name)).toEqual(roles(hf, s.name));
    expect(spec.stages[0]!.tensors[0]).toMatchObject({ role: 'input_proj.weight', shape: [64, 3, 16, 16], dtype: 'f16' });
    expect(spec.stages[0]!.tensors[1]).toMatchObject({ role: 'position_embedding_table', shape: [2, 1024, 64], dtype: 'f32' });
  });

  it('Ollama, per-linear clamp scalars: same roles as the folder; text and audio tensors ignored', async () => {
    const hf = (await loadModel(GEMMA4_MODEL)).spec;
    const { spec } = await loadModel(ollama({ clamps: 'scalars', withTextModel: true }));
    expect(spec.source).toBe('gguf-ollama');
    for (const s of hf.stages) expect(roles(spec, s.name)).toEqual(roles(hf, s.name));
    expect(spec.stages.flatMap((s) => s.tensors).some((t) => /^(token_embd|a\.)/.test(t.name))).toBe(false);
  });

  it('Ollama, packed v.clamp_data: one 16-byte <lin>.clamp per linear, the projector entry last', async () => {
    const path = ollama({ clamps: 'packed' });
    const { spec } = await loadModel(path);
    const h = await readGgufHeader(path);
    const base = h.tensors.get('v.clamp_data')!.offset;
    const b2 = spec.stages.find((s) => s.name === 'block.2')!.tensors;
    expect(b2.filter((t) => t.role.endsWith('.clamp')).map((t) => t.role)).toEqual([
      'self_attn.q_proj.clamp', 'self_attn.k_proj.clamp', 'self_attn.v_proj.clamp', 'self_attn.o_proj.clamp',
      'mlp.gate_proj.clamp', 'mlp.up_proj.clamp', 'mlp.down_proj.clamp',
    ]);
    expect(b2.find((t) => t.role === 'self_attn.k_proj.clamp')).toMatchObject({ offset: base + (7 * 2 + 1) * 16, length: 16, shape: [4] });
    expect(b2.some((t) => t.role.endsWith('.input_min'))).toBe(false);
    expect(spec.stages.at(-1)!.tensors.find((t) => t.role === 'embedding_projection.clamp')).toMatchObject({ offset: base + 21 * 16 });
  });
});

describe('Gemma 4 spec: hub layout', () => {
  it("reads the budget from processor_config.json's image_processor when there is no preprocessor_config.json", async () => {
    const copy = join(dir, 'hub');
    cpSync(GEMMA4_MODEL, copy, { recursive: true });
    const pre = JSON.parse(readFileSync(join(copy, 'preprocessor_config.json'), 'utf8'));
    rmSync(join(copy, 'preprocessor_config.json'));
    writeFileSync(join(copy, 'processor_config.json'), JSON.stringify({ image_processor: { ...pre, max_soft_tokens: 560 }, image_seq_length: 280 }));
    const { spec } = await loadModel(copy);
    expect(spec.dims['max_soft_tokens']).toBe(560);
  });
});

describe('Gemma 4 spec: refusals', () => {
  it('a quantised tower tensor → ERR_MODEL_FORMAT naming the tensor and its type', async () => {
    const e = await refused(
      ollama({
        clamps: 'scalars',
        withTextModel: true,
        // Q8_0 is read (widened as ggml does); the other quantised types are not.
        patch: (t) => (t.name === 'v.blk.1.attn_v.weight' ? { ...t, type: GGML.Q4_0, data: new Uint8Array((64 * 64 / 32) * 18) } : t),
      }),
    );
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toMatch(/v\.blk\.1\.attn_v\.weight.*Q4_0/);
  });
  it('a missing tower tensor → ERR_TENSOR_MISSING naming it', async () => {
    const e = await refused(ollama({ clamps: 'scalars', patch: (t) => (t.name === 'v.blk.2.ffn_up.weight' ? { ...t, name: 'v.blk.2.ffn_upx.weight' } : t) }));
    expect(e.code).toBe('ERR_TENSOR_MISSING');
    expect(e.message).toMatch(/v\.blk\.2\.ffn_up\.weight/);
  });
  it('a tensor of the wrong shape → ERR_TENSOR_SHAPE', async () => {
    const e = await refused(ollama({ clamps: 'scalars', patch: (t) => (t.name === 'v.blk.0.ln2.weight' ? { ...t, ne: [32], data: t.data.subarray(0, 128) } : t) }));
    expect(e.code).toBe('ERR_TENSOR_SHAPE');
    expect(e.message).toMatch(/v\.blk\.0\.ln2\.weight/);
  });
  it('a packed v.clamp_data of the wrong length → ERR_TENSOR_SHAPE', async () => {
    const e = await refused(ollama({ clamps: 'packed', patch: (t) => (t.name === 'v.clamp_data' ? { ...t, ne: [80], data: t.data.subarray(0, 320) } : t) }));
    expect(e.code).toBe('ERR_TENSOR_SHAPE');
  });
  it('a gemma4 GGUF without a vision tower, another architecture, the unified gemma4uv → ERR_MODEL_FORMAT', async () => {
    const noVision = await refused(ollama({ clamps: 'scalars', dropKv: ['gemma4.vision.block_count'] }));
    expect(noVision.code).toBe('ERR_MODEL_FORMAT');
    expect(noVision.message).toMatch(/no vision tower/);
    const llama = await refused(ollama({ clamps: 'scalars', arch: 'llama4' }));
    expect(llama.code).toBe('ERR_MODEL_FORMAT');
    expect(llama.message).toMatch(/architecture 'llama4'/);
    // 'gemma4v' → 'gemma4uv': one byte more in the header, absorbed by the padding before the data.
    const mm = readFileSync(GEMMA4_MMPROJ);
    const at = mm.indexOf('gemma4v');
    const uv = await refused(save(Buffer.concat([mm.subarray(0, at - 8), u64(8), Buffer.from('gemma4uv'), mm.subarray(at + 7)]).subarray(0, mm.length)));
    expect(uv.code).toBe('ERR_MODEL_FORMAT');
    expect(uv.message).toMatch(/gemma4uv/);
  });
  it('an mmproj with ImageNet mean/std (would double-map pixels) → ERR_MODEL_FORMAT', async () => {
    const b = Buffer.from(readFileSync(GEMMA4_MMPROJ));
    const at = b.indexOf('clip.vision.image_mean') + 'clip.vision.image_mean'.length + 4 + 4 + 8;
    b.writeFloatLE(0.5, at);
    const e = await refused(save(b));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toMatch(/image_mean/);
  });
  it('config: a soft-token budget HF refuses, GQA heads → ERR_CONFIG_INVALID naming the field', async () => {
    const copy = join(dir, 'folder');
    cpSync(GEMMA4_MODEL, copy, { recursive: true });
    const pre = JSON.parse(readFileSync(join(copy, 'preprocessor_config.json'), 'utf8'));
    writeFileSync(join(copy, 'preprocessor_config.json'), JSON.stringify({ ...pre, max_soft_tokens: 300 }));
    let e = await refused(copy);
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(/max_soft_tokens/);
    writeFileSync(join(copy, 'preprocessor_config.json'), JSON.stringify(pre));
    const cfg = JSON.parse(readFileSync(join(copy, 'config.json'), 'utf8'));
    cfg.vision_config.num_key_value_heads = 2;
    writeFileSync(join(copy, 'config.json'), JSON.stringify(cfg));
    e = await refused(copy);
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(/num_key_value_heads/);
    delete cfg.text_config.hidden_size;
    writeFileSync(join(copy, 'config.json'), JSON.stringify(cfg));
    e = await refused(copy);
    expect(e.message).toMatch(/text_config\.hidden_size/);
  });
});

describe('GGUF fuzz smoke test', () => {
  const rand = seededRandom(0x9e3779b9); // deterministic: a failure reproduces
  const fixture = readFileSync(GEMMA4_MMPROJ);
  const headerEnd = 8256; // metadata + tensor infos of the fixture end before this (data starts here)
  const ALLOWED = ['ERR_WEIGHTS_CORRUPT', 'ERR_MODEL_FORMAT', 'ERR_CONFIG_INVALID', 'ERR_TENSOR_MISSING', 'ERR_TENSOR_SHAPE'];

  async function attempt(bytes: Buffer): Promise<'ok' | string> {
    const p = join(dir, 'fuzz.gguf');
    writeFileSync(p, bytes);
    try {
      buildGemma4FromGguf(await readGgufHeader(p));
      return 'ok';
    } catch (e) {
      if (!(e instanceof TesseraError)) throw e; // a crash-like failure: the test fails with it
      expect(ALLOWED).toContain(e.code);
      return e.code;
    }
  }

  it('every truncation is refused with a code', async () => {
    const cuts = [0, 3, 4, 7, 8, 23, 24, headerEnd - 1, headerEnd, fixture.length - 1];
    for (let i = 0; i < 60; i++) cuts.push(Math.floor(rand() * headerEnd));
    for (let i = 0; i < 15; i++) cuts.push(Math.floor(rand() * fixture.length));
    for (const c of cuts) expect(await attempt(fixture.subarray(0, c))).not.toBe('ok');
  });

  it('byte flips: a code or a valid spec, never a crash', async () => {
    let refusedCount = 0;
    for (let i = 0; i < 150; i++) {
      const b = Buffer.from(fixture);
      const flips = 1 + Math.floor(rand() * 4);
      for (let f = 0; f < flips; f++) {
        const at = Math.floor(rand() * (rand() < 0.9 ? headerEnd : b.length));
        b[at] = rand() < 0.5 ? b[at]! ^ (1 << Math.floor(rand() * 8)) : Math.floor(rand() * 256);
      }
      if ((await attempt(b)) !== 'ok') refusedCount++;
    }
    expect(refusedCount).toBeGreaterThan(0);
  });
});

function u64(v: number) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
}
