// The Qwen2-VL and Qwen2.5-VL TowerSpecs (src/families/qwen2/) from Hub-shaped folders, before any native code:
// dimensions and stages as the fixture configs state them, both checkpoint layouts (model.visual. and visual.),
// a tower saved alone, and every refusal naming its field: a fullatt_block_indexes entry outside the depth or
// repeated, a window size that is not whole merged tokens, an activation the tower does not have, heads that do
// not split, an output width that is not the text model's, and a grid that does not fit the tower.
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QWEN_PIXEL_INPUTS } from '../src/families/qwen-common.js';
import { TesseraError } from '../src/index.js';
import { loadModel } from '../src/load-model.js';
import { toSglangItemJson, toVllmContentPart } from '../src/index.js';
import type { TowerSpec } from '../src/spec/types.js';
import { FIXTURES, readJson } from './helpers/fixtures.js';
import { copyModel, editConfig, readRaw, writeRaw } from './helpers/model-copy.js';

const MODELS = { qwen2_vl: join(FIXTURES, 'qwen2_vl-tiny', 'model'), qwen2_5_vl: join(FIXTURES, 'qwen2_5_vl-tiny', 'model') } as const;
type Id = keyof typeof MODELS;
const vision = (id: Id) => readJson<{ vision_config: Record<string, any> }>(join(MODELS[id], 'config.json')).vision_config;

const made: string[] = [];
afterEach(() => made.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
function edited(id: Id, edit: (c: any) => void): string {
  const dir = copyModel(MODELS[id]);
  made.push(dir);
  editConfig(dir, edit);
  return dir;
}
async function refusal(dir: string): Promise<TesseraError> {
  const e = await loadModel(dir).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(TesseraError);
  return e as TesseraError;
}

/** The dimensions each config states, under the field names of its own family. */
function statedDims(id: Id): Record<string, number> {
  const v = vision(id);
  const hidden = id === 'qwen2_vl' ? v['embed_dim'] : v['hidden_size'];
  return {
    depth: v['depth'],
    hidden,
    heads: v['num_heads'],
    head_dim: hidden / v['num_heads'],
    intermediate: id === 'qwen2_vl' ? v['embed_dim'] * v['mlp_ratio'] : v['intermediate_size'],
    out_hidden: id === 'qwen2_vl' ? v['hidden_size'] : v['out_hidden_size'],
    in_channels: v['in_channels'],
    patch_size: v['patch_size'],
    temporal_patch_size: v['temporal_patch_size'],
    merge_size: v['spatial_merge_size'],
    eps: 1e-6,
    rope_theta: v['rope_parameters']['rope_theta'],
    window: id === 'qwen2_vl' ? 0 : v['window_size'] / (v['patch_size'] * v['spatial_merge_size']),
  };
}

describe.each(Object.keys(MODELS) as Id[])('%s TowerSpec', (id) => {
  it('dims, lists and stages as the config states them; every role is HF name under its stage base', async () => {
    const { spec } = await loadModel(MODELS[id]);
    expect(spec.family).toBe(id);
    expect(spec.source).toBe('hf-folder');
    expect(spec.dims).toEqual(statedDims(id));
    expect(spec.lists).toEqual({ fullatt_blocks: id === 'qwen2_vl' ? [] : vision(id)['fullatt_block_indexes'] });
    const depth = spec.dims['depth']!;
    expect(spec.stages.map((s) => s.name)).toEqual(['embed', ...Array.from({ length: depth }, (_, l) => `block.${l}`), 'merged']);
    expect(spec.stages.map((s) => s.kind)).toEqual(['embed', ...Array(depth).fill('block'), 'merger']);
    const { hidden: D, in_channels: C, temporal_patch_size: T, patch_size: P, intermediate: I, out_hidden: O, merge_size: m } = spec.dims as Record<string, number>;
    const W = D! * m! * m!;
    const shapes = (s: TowerSpec['stages'][number]) => Object.fromEntries(s.tensors.map((t) => [t.role, t.shape]));
    expect(shapes(spec.stages[0]!)).toEqual({ 'patch_embed.proj.weight': [D, C, T, P, P] });
    const block =
      id === 'qwen2_vl'
        ? { 'norm1.weight': [D], 'norm1.bias': [D], 'norm2.weight': [D], 'norm2.bias': [D], 'mlp.fc1.weight': [I, D], 'mlp.fc1.bias': [I], 'mlp.fc2.weight': [D, I], 'mlp.fc2.bias': [D] }
        : { 'norm1.weight': [D], 'norm2.weight': [D], 'mlp.gate_proj.weight': [I, D], 'mlp.gate_proj.bias': [I], 'mlp.up_proj.weight': [I, D], 'mlp.up_proj.bias': [I], 'mlp.down_proj.weight': [D, I], 'mlp.down_proj.bias': [D] };
    const attention = { 'attn.qkv.weight': [3 * D!, D], 'attn.qkv.bias': [3 * D!], 'attn.proj.weight': [D, D], 'attn.proj.bias': [D] };
    for (const s of spec.stages.slice(1, -1)) {
      expect(shapes(s)).toEqual({ ...block, ...attention });
      for (const t of s.tensors) expect(t.name).toBe(`model.visual.blocks.${s.index}.${t.role}`);
    }
    const norm = id === 'qwen2_vl' ? { 'ln_q.weight': [D], 'ln_q.bias': [D] } : { 'ln_q.weight': [D] };
    expect(shapes(spec.stages.at(-1)!)).toEqual({ ...norm, 'mlp.0.weight': [W, W], 'mlp.0.bias': [W], 'mlp.2.weight': [O, W], 'mlp.2.bias': [O] });
    for (const t of spec.stages.at(-1)!.tensors) expect(t.name).toBe(`model.visual.merger.${t.role}`);
    // Every tensor of the checkpoint's tower is in the spec: none is left unread.
    const stored = new Set<string>();
    for (const f of readdirSync(MODELS[id]).filter((f) => f.endsWith('.safetensors')))
      for (const name of Object.keys(readRaw(join(MODELS[id], f)).header)) if (name.startsWith('model.visual.')) stored.add(name);
    expect(new Set(spec.stages.flatMap((s) => s.tensors.map((t) => t.name)))).toEqual(stored);
  });

  it("the older Hub layout (tensors under 'visual.') gives the same spec", async () => {
    const dir = copyModel(MODELS[id]);
    made.push(dir);
    for (const f of readdirSync(dir)) {
      if (f.endsWith('.safetensors')) {
        const raw = readRaw(join(dir, f));
        const header = Object.fromEntries(Object.entries(raw.header).map(([k, v]) => [k.replace(/^model\.visual\./, 'visual.'), v]));
        writeRaw(join(dir, f), header, raw.data);
      } else if (f.endsWith('.index.json')) {
        const index = JSON.parse(readFileSync(join(dir, f), 'utf8'));
        index.weight_map = Object.fromEntries(Object.entries(index.weight_map).map(([k, v]) => [k.replace(/^model\.visual\./, 'visual.'), v]));
        writeFileSync(join(dir, f), JSON.stringify(index));
      }
    }
    const a = (await loadModel(MODELS[id])).spec;
    const b = (await loadModel(dir)).spec;
    expect(b.stages.map((s) => s.tensors.map((t) => [t.role, t.shape, t.dtype]))).toEqual(a.stages.map((s) => s.tensors.map((t) => [t.role, t.shape, t.dtype])));
    expect(b.stages[1]!.tensors[0]!.name).toMatch(/^visual\.blocks\.0\./);
    expect(b.dims).toEqual(a.dims);
  });

  it('a tower saved on its own (config.json is the vision config, model_type *_vision) gives the same spec', async () => {
    const dir = edited(id, (c) => {
      for (const k of Object.keys(c)) delete c[k];
      Object.assign(c, vision(id));
    });
    expect(vision(id)['model_type']).toBe(`${id}_vision`);
    const { spec } = await loadModel(dir);
    expect(spec.family).toBe(id);
    expect(spec.dims).toEqual((await loadModel(MODELS[id])).spec.dims);
  });

  it('an activation the tower does not have → ERR_CONFIG_INVALID naming hidden_act', async () => {
    const e = await refusal(edited(id, (c) => (c.vision_config.hidden_act = 'gelu')));
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(/vision_config\.hidden_act/);
  });

  it('heads that do not split the width into multiples of 4 → ERR_CONFIG_INVALID naming num_heads', async () => {
    for (const heads of [5, 8]) {
      const e = await refusal(edited(id, (c) => (c.vision_config.num_heads = heads)));
      expect(e.code).toBe('ERR_CONFIG_INVALID');
      expect(e.message).toMatch(/vision_config\.num_heads/);
    }
  });

  it("an output width that is not the text model's → ERR_CONFIG_INVALID naming the field", async () => {
    const e = await refusal(edited(id, (c) => (c.text_config.hidden_size += 8)));
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(id === 'qwen2_vl' ? /vision_config\.hidden_size/ : /vision_config\.out_hidden_size/);
  });

  it('vLLM and SGLang take its rows with image_grid_thw (no deepstack)', async () => {
    const { spec } = await loadModel(MODELS[id]);
    const width = spec.dims['out_hidden']!;
    const grid = { t: 1, h: 4, w: 6 };
    const tokens = (grid.h * grid.w) / 4;
    const embeddings = Float32Array.from({ length: tokens * width }, (_, i) => i / 7);
    const r = { embeddings, tokens, width, grid: [grid], timings: { decodeMs: 0, preprocessMs: 0, encodeMs: 0 } };
    const part = toVllmContentPart(r, spec.family) as { type: string; image_embeds: { image_grid_thw: string } };
    expect(part.type).toBe('image_embeds');
    expect(Object.keys(part.image_embeds).sort()).toEqual(['image_embeds', 'image_grid_thw']);
    const item = JSON.parse(toSglangItemJson(r)) as { feature: number[][]; image_grid_thw: number[][] };
    expect(item.feature.length).toBe(tokens);
    expect(item.feature[0]!.length).toBe(width);
    expect(item.image_grid_thw).toEqual([[1, 4, 6]]);
  });
});

describe('Qwen2.5-VL window attention config', () => {
  it('a fullatt_block_indexes entry outside the depth, or repeated → ERR_CONFIG_INVALID naming the field', async () => {
    const depth = vision('qwen2_5_vl')['depth'];
    for (const list of [[depth], [1, 1]]) {
      const e = await refusal(edited('qwen2_5_vl', (c) => (c.vision_config.fullatt_block_indexes = list)));
      expect(e.code).toBe('ERR_CONFIG_INVALID');
      expect(e.message).toMatch(/vision_config\.fullatt_block_indexes/);
    }
  });

  it('a window_size that is not whole merged tokens (patch x merge) → ERR_CONFIG_INVALID naming window_size', async () => {
    const side = vision('qwen2_5_vl')['patch_size'] * vision('qwen2_5_vl')['spatial_merge_size'];
    const e = await refusal(edited('qwen2_5_vl', (c) => (c.vision_config.window_size = 4 * side + 1)));
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(/vision_config\.window_size/);
    // A whole number of merged tokens is taken: the window in the spec is in merged tokens per side.
    const { spec } = await loadModel(edited('qwen2_5_vl', (c) => (c.vision_config.window_size = 2 * side)));
    expect(spec.dims['window']).toBe(2);
  });
});

describe('a grid that does not fit the tower', () => {
  it('h or w not a whole number of merge windows → ERR_INVALID_ARGUMENT naming the grid', async () => {
    const { spec } = await loadModel(MODELS.qwen2_5_vl);
    const m = spec.dims['merge_size']!;
    const check = QWEN_PIXEL_INPUTS.check;
    const pixelValues = new Float32Array(0);
    expect(() => check({ pixelValues, grid: { t: 1, h: 2 * m, w: 3 * m } }, spec.dims)).not.toThrow();
    for (const grid of [{ t: 1, h: 2 * m + 1, w: 2 * m }, [[1, 2 * m, 2 * m], [1, 2 * m, 3 * m - 1]] as [number, number, number][]]) {
      let err: unknown;
      try {
        check({ pixelValues, grid }, spec.dims);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(TesseraError);
      expect((err as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
      expect((err as TesseraError).message).toMatch(/grid/);
      expect((err as TesseraError).message).toContain(`merge_size ${m}`);
    }
  });
});
