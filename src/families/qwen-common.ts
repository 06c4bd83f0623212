// What the Qwen families share (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5): where a checkpoint keeps the tower's
// tensors, and the image side: their images go through HF's Qwen2VLImageProcessor, so encodePixels takes HF's
// pixel_values and image_grid_thw, images are sized by a pixel-area budget (minPixels / maxPixels), and the
// preprocessor is the Qwen pipeline (src/image/) with the checkpoint's preprocessor_config.json.
import { z } from 'zod';
import { TesseraError } from '../errors.js';
import { type GgufHeader, ggufKind, ggufNumber, ggufNumberArray, ggufTensorIndex } from '../formats/gguf.js';
import type { TensorIndex } from '../formats/tensor-index.js';
import { parseQwenPreprocessConfig, planQwen, preprocessQwen } from '../image/index.js';
import { MAX_INT32, float32Array, positiveInt } from '../limits.js';
import type { Grid, GridTriple, PixelInput, QwenPixelInput } from '../options.js';
import type { Preprocessor } from '../prepare.js';
import { headSplitProblem } from '../spec/rules.js';
import { assembledTensor, towerTensor } from '../spec/tensors.js';
import type { StageSpec, TensorSpec, TowerSpec } from '../spec/types.js';
import { checkGeometry } from './geometry.js';
import type { ReferenceInput, TowerFamily } from './family.js';

/** Where the tower's tensors sit in a checkpoint: transformers 5, older Hub layouts, a tower saved alone. @internal */
export const QWEN_PREFIXES = ['model.visual.', 'visual.', ''];

// ---------------------------------------------------------------- the stages, whatever the source

/** A stage as HF lays it out: a tensor's name is the checkpoint prefix, `base` and its role. @internal */
export interface QwenStageLayout {
  name: string;
  kind: StageSpec['kind'];
  index: number;
  base: string;
  tensors: [role: string, shape: number[]][];
}

/** Finds a stage's tensor by its HF role: a source's names and layout → TensorSpec. @internal */
export type QwenPicker = (stage: QwenStageLayout, role: string, shape: number[]) => TensorSpec;

/** The family's layout → the TowerSpec's stages, each tensor found by `pick`. @internal */
export function qwenStages(layout: readonly QwenStageLayout[], pick: QwenPicker): StageSpec[] {
  return layout.map((s) => ({ name: s.name, kind: s.kind, index: s.index, tensors: s.tensors.map(([role, shape]) => pick(s, role, shape)) }));
}

/** An HF checkpoint's tensors: the prefix the tower sits under (QWEN_PREFIXES), then each stage's base and role. @internal */
export function hfPicker(index: TensorIndex): QwenPicker {
  const prefix = QWEN_PREFIXES.find((p) => index.tensors.has(`${p}patch_embed.proj.weight`));
  if (prefix === undefined) throw new TesseraError('ERR_TENSOR_MISSING', `tower tensor 'model.visual.patch_embed.proj.weight' is missing from the weights`);
  return (s, role, shape) => towerTensor(index, `${prefix}${s.base}${role}`, role, shape);
}

// ---------------------------------------------------------------- llama.cpp mmproj files

/** The llama.cpp projector types of the Qwen towers (clip.projector_type), by family folder. @internal */
export const QWEN2_PROJECTORS = ['qwen2vl_merger', 'qwen2.5vl_merger'] as const;
export const QWEN3_PROJECTORS = ['qwen3vl_merger'] as const;

/**
 * GGUF names of HF's modules in llama.cpp's mmproj files (docs/models/qwen-vision.md#llamacpp-mmproj), by stage
 * kind: a role is the module and `.weight` or `.bias`. Blocks sit under `v.blk.N.`, deepstack mergers under
 * `v.deepstack.L.` (L the block they follow), the rest at the top.
 */
const LLAMACPP_MODULES: Record<string, Record<string, string>> = {
  embed: { 'patch_embed.proj': 'v.patch_embd', pos_embed: 'v.position_embd' },
  block: {
    norm1: 'ln1', norm2: 'ln2', 'attn.qkv': 'attn_qkv', 'attn.proj': 'attn_out',
    'mlp.linear_fc1': 'ffn_up', 'mlp.linear_fc2': 'ffn_down', // Qwen3-VL, Qwen3.5
    'mlp.fc1': 'ffn_up', 'mlp.fc2': 'ffn_down', // Qwen2-VL
    'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down', // Qwen2.5-VL
  },
  deepstack: { norm: 'norm', linear_fc1: 'fc1', linear_fc2: 'fc2' },
  merger: { ln_q: 'v.post_ln', norm: 'v.post_ln', 'mlp.0': 'mm.0', 'mlp.2': 'mm.2', linear_fc1: 'mm.0', linear_fc2: 'mm.2' },
};

/**
 * Where a GGUF layout keeps a Qwen tower: its metadata prefix, the names HF's modules take (LLAMACPP_MODULES'
 * form), the patch kernel (its two time steps as two Conv2d tensors, or the Conv3d kernel whole with D and C
 * folded into one axis: [D·C, T, P, P]), and where a deepstack merger sits (by the block it follows, or by its
 * own number). @internal
 */
export interface QwenGgufLayout {
  source: 'gguf-llama.cpp' | 'gguf-ollama';
  keys: string;
  modules: Record<string, Record<string, string>>;
  patch: { steps: [string, string] } | { whole: string };
  deepstackBase(k: number, block: number): string;
  /** A block's MLP up-projection (its rows are the MLP width), after `v.blk.N.`. */
  mlpUp: string;
}

/** llama.cpp's mmproj files (general.architecture clip). @internal */
export const LLAMACPP_LAYOUT: QwenGgufLayout = {
  source: 'gguf-llama.cpp',
  keys: 'clip.vision.',
  modules: LLAMACPP_MODULES,
  patch: { steps: ['v.patch_embd.weight', 'v.patch_embd.weight.1'] },
  deepstackBase: (_k, block) => `v.deepstack.${block}.`,
  mlpUp: 'ffn_up',
};

/**
 * Ollama's single Qwen2.5-VL file (general.architecture qwen25vl, its convert_qwen25vl.go): llama.cpp's block
 * names, the merger under its HF names (`v.merger.ln_q`, `mlp.0`, `mlp.2`), the patch kernel's time steps as
 * `v.patch_embd_0` / `_1`, keys under `qwen25vl.vision.`. @internal
 */
export const OLLAMA_QWEN25VL_LAYOUT: QwenGgufLayout = {
  source: 'gguf-ollama',
  keys: 'qwen25vl.vision.',
  modules: { ...LLAMACPP_MODULES, merger: { ln_q: 'v.merger.ln_q', 'mlp.0': 'v.merger.mlp.0', 'mlp.2': 'v.merger.mlp.2' } },
  patch: { steps: ['v.patch_embd_0.weight', 'v.patch_embd_1.weight'] },
  deepstackBase: (_k, block) => `v.deepstack.${block}.`,
  mlpUp: 'ffn_up',
};

/**
 * Ollama's single Qwen3-VL file (general.architecture qwen3vl or qwen3vlmoe, its convert_qwen3vl.go), and its
 * Qwen3.5 file (qwen35 or qwen35moe, convert_qwen3next.go), which lays the tower out alike: HF's
 * names under `v.` with blocks as `blk` and `attn.proj` as `attn_out`, qkv split into attn_q / k / v, the
 * patch kernel whole ([D·C, T, P, P]), deepstack mergers as `v.deepstack_merger.K` (K their own number), keys
 * under `<arch>.vision.`. @internal
 */
export function ollamaQwen3vlLayout(arch: string): QwenGgufLayout {
  const merger = { norm: 'v.merger.norm', linear_fc1: 'v.merger.linear_fc1', linear_fc2: 'v.merger.linear_fc2' };
  return {
    source: 'gguf-ollama',
    keys: `${arch}.vision.`,
    modules: {
      embed: { 'patch_embed.proj': 'v.patch_embed', pos_embed: 'v.pos_embed' },
      block: { norm1: 'norm1', norm2: 'norm2', 'attn.qkv': 'attn_qkv', 'attn.proj': 'attn_out', 'mlp.linear_fc1': 'mlp.linear_fc1', 'mlp.linear_fc2': 'mlp.linear_fc2' },
      deepstack: { norm: 'norm', linear_fc1: 'linear_fc1', linear_fc2: 'linear_fc2' },
      merger: { ...merger, 'mlp.0': merger.linear_fc1, 'mlp.2': merger.linear_fc2 },
    },
    patch: { whole: 'v.patch_embed.weight' },
    deepstackBase: (k) => `v.deepstack_merger.${k}.`,
    mlpUp: 'mlp.linear_fc1',
  };
}

/** What a Qwen GGUF file states and its tensors' shapes say, read the same for every layout and tower. @internal */
export interface QwenGguf {
  h: GgufHeader;
  layout: QwenGgufLayout;
  index: TensorIndex;
  depth: number;
  hidden: number;
  heads: number;
  /** The blocks' MLP width (ffn_up's rows: Qwen2-VL's feed_forward_length is the merger's output width). */
  intermediate: number;
  /** The output width (the merger's second linear's rows). */
  outHidden: number;
  /** Patches merged per side (the merger's first linear's width over the blocks'). */
  merge: number;
  inChannels: number;
  patchSize: number;
  eps: number;
}

/**
 * A Qwen GGUF file's common reading: the sizes come from the metadata (under the layout's prefix) and the
 * tensors' shapes, each refusal naming the key or tensor. The converters write the Conv3d patch kernel as two
 * Conv2d tensors (its two time steps), so temporal_patch_size is 2.
 * @internal
 */
export function readQwenGguf(h: GgufHeader, layout: QwenGgufLayout): QwenGguf {
  const where = h.path;
  const index = ggufTensorIndex(h);
  const pre = layout.keys;
  const key = (k: string, max = 1 << 20): number => {
    const v = ggufNumber(h, pre + k);
    if (v === undefined) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata '${pre}${k}' is missing`);
    if (!Number.isInteger(v) || v < 1 || v > max) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata '${pre}${k}' = ${v} is out of range`);
    return v;
  };
  /** A tensor's numpy shape, or a refusal naming it and what it should hold. */
  const shapeOf = (name: string, rank: number, what: string): number[] => {
    const t = index.tensors.get(name);
    if (!t) throw new TesseraError('ERR_TENSOR_MISSING', `${where}: tower tensor '${name}' is missing (${what})`);
    if (t.shape.length !== rank) throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor '${name}' has shape [${t.shape.join(', ')}], expected ${rank} dimensions (${what})`);
    return t.shape;
  };
  const hidden = key('embedding_length', 16384);
  const heads = key('attention.head_count', 256);
  const depth = key('block_count', 256);
  const split = headSplitProblem(hidden, heads);
  if (split) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: ${pre}embedding_length ${split} (${pre}attention.head_count)`);
  const step0 = 'steps' in layout.patch ? layout.patch.steps[0] : layout.patch.whole;
  const patch = shapeOf(step0, 4, 'steps' in layout.patch ? `[${hidden}, 3, patch, patch]` : `[${hidden} x 3, 2, patch, patch]`);
  let inChannels = patch[1]!;
  const patchSize = patch[3]!;
  if ('whole' in layout.patch) {
    inChannels = patch[0]! / hidden;
    if (!Number.isInteger(inChannels) || patch[1] !== 2 || patch[2] !== patchSize)
      throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor '${step0}' has shape [${patch.join(', ')}], expected [${hidden} x channels, 2, patch, patch]`);
  }
  const stated = ggufNumber(h, `${pre}patch_size`);
  if (stated !== undefined && stated !== patchSize)
    throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor '${step0}' has shape [${patch.join(', ')}], expected patches of ${stated} (${pre}patch_size)`);
  const intermediate = shapeOf(`v.blk.0.${layout.mlpUp}.weight`, 2, `[mlp width, ${hidden}]`)[0]!;
  const up = `${layout.modules['merger']!['mlp.0']}.weight`, down = `${layout.modules['merger']!['mlp.2']}.weight`;
  const w = shapeOf(up, 2, `[${hidden} x merge², ${hidden} x merge²]`)[1]!;
  const merge = Math.round(Math.sqrt(w / hidden));
  if (merge < 1 || merge * merge * hidden !== w)
    throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor '${up}' is ${w} wide, expected ${hidden} x merge² (a whole merge of ${hidden}-wide patches)`);
  const statedMerge = ggufNumber(h, `${pre}spatial_merge_size`);
  if (statedMerge !== undefined && statedMerge !== merge)
    throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor '${up}' merges ${merge}x${merge} patches, but ${pre}spatial_merge_size is ${statedMerge}`);
  const statedSteps = ggufNumber(h, `${pre}temporal_patch_size`);
  if (statedSteps !== undefined && statedSteps !== 2)
    throw new TesseraError('ERR_MODEL_FORMAT', `${where}: ${pre}temporal_patch_size is ${statedSteps}; the file holds the patch kernel's time steps as two tensors (2)`);
  const outHidden = shapeOf(down, 2, `[output width, ${w}]`)[0]!;
  const eps = ggufNumber(h, `${pre}attention.layer_norm_epsilon`) ?? 1e-6;
  if (!(eps > 0 && eps < 1e-2)) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: ${pre}attention.layer_norm_epsilon ${eps} is out of range`);
  return { h, layout, index, depth, hidden, heads, intermediate, outHidden, merge, inChannels, patchSize, eps };
}

/**
 * A Qwen GGUF file's tensors by HF role (the layout's names), with the two the converters split assembled
 * (assembledTensor): the patch kernel from its two time steps (interleaved per channel as HF's rows
 * (c, t, py, px)), and a block's qkv from attn_q, attn_k and attn_v (stacked rows) where the file has no
 * attn_qkv. `deepstack` lists the block each deepstack merger follows.
 * @internal
 */
export function ggufPicker(g: QwenGguf, deepstack: readonly number[] = []): QwenPicker {
  const { index, h, layout } = g;
  return (s, role, shape) => {
    if (role === 'patch_embed.proj.weight') {
      const [D, C, T, P] = shape as [number, number, number, number, number];
      if ('whole' in layout.patch) return assembledTensor(index, [layout.patch.whole], role, [D * C, T, P, P], shape, D * C * T * P * P);
      return assembledTensor(index, layout.patch.steps, role, [D, C, P, P], shape, P * P);
    }
    const dot = role.lastIndexOf('.');
    const module = role.slice(0, dot), suffix = role.slice(dot);
    const stem = layout.modules[s.kind]?.[module];
    if (stem === undefined) throw new TesseraError('ERR_INTERNAL', `${h.path}: no GGUF name for ${s.kind} role '${role}'`);
    const base = s.kind === 'block' ? `v.blk.${s.index}.` : s.kind === 'deepstack' ? layout.deepstackBase(s.index, deepstack[s.index]!) : '';
    const name = `${base}${stem}${suffix}`;
    if (module === 'attn.qkv' && !index.tensors.has(name)) {
      const part = [shape[0]! / 3, ...shape.slice(1)];
      const names = ['attn_q', 'attn_k', 'attn_v'].map((q) => `${base}${q}${suffix}`);
      return assembledTensor(index, names, role, part, shape, part.reduce((a, b) => a * b, 1));
    }
    return towerTensor(index, name, role, shape);
  };
}

/**
 * The processor settings a Qwen GGUF file implies: the tower's patch, merge and temporal sizes, and what the
 * file states of the rest (a llama.cpp mmproj its image_mean / image_std; Ollama's Qwen3-VL file those and the
 * pixel budget, shortest_edge / longest_edge, under <arch>.vision.), the Qwen processor's class defaults for
 * what it does not (min / max pixels 56² / 28²·1280 and OpenAI CLIP's mean and std, as transformers'
 * Qwen2VLImageProcessor).
 * @internal
 */
export function qwenGgufProcessor(h: GgufHeader, spec: TowerSpec): Record<string, unknown> {
  const defaults = parseQwenPreprocessConfig({}, h.path);
  const { arch } = ggufKind(h);
  const pre = arch === 'clip' ? 'clip.vision.' : `${arch}.vision.`;
  const triple = (k: string, fallback: number[]): number[] => {
    const v = ggufNumberArray(h, pre + k) ?? fallback;
    if (v.length !== 3) throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${pre}${k}' has ${v.length} values, expected 3`);
    return v;
  };
  // A zero is the converter's fill for a preprocessor_config.json that omitted the key.
  const edge = (k: string, fallback: number) => ggufNumber(h, pre + k) || fallback;
  return {
    patch_size: spec.dims['patch_size'],
    temporal_patch_size: spec.dims['temporal_patch_size'],
    merge_size: spec.dims['merge_size'],
    size: { shortest_edge: edge('shortest_edge', defaults.minPixels), longest_edge: edge('longest_edge', defaults.maxPixels) },
    image_mean: triple('image_mean', defaults.imageMean),
    image_std: triple('image_std', defaults.imageStd),
  };
}

/** The sizing options: the resized image's pixel-area bounds. @internal */
export const QWEN_SIZING_KEYS = {
  minPixels: positiveInt.optional(),
  maxPixels: positiveInt.optional(),
};

const gridSide = z.number().int().min(1).max(MAX_INT32);
const GridSchema = z.union([z.object({ t: gridSide, h: gridSide, w: gridSide }).strict(), z.tuple([gridSide, gridSide, gridSide])]);

/** encodePixels' input: { pixelValues, grid } (one grid or one per image). @internal */
export const QWEN_PIXEL_INPUT = z.object({ pixelValues: float32Array, grid: z.union([GridSchema, z.array(GridSchema).min(1)]) }).strict();

/** One grid or a list, each { t, h, w } or [t, h, w] (sides already checked by the schema), as a list of { t, h, w }. @internal */
export function normaliseGrid(grid: QwenPixelInput['grid']): Grid[] {
  const list: (Grid | GridTriple)[] =
    Array.isArray(grid) && !(grid.length === 3 && grid.every((v) => typeof v === 'number')) ? (grid as (Grid | GridTriple)[]) : [grid as Grid];
  return list.map((g) => (Array.isArray(g) ? { t: g[0], h: g[1], w: g[2] } : { t: g.t, h: g.h, w: g.w }));
}

/** Each image's grid fits the tower: its rows and columns are whole merge windows (the processor makes no other). */
function checkQwenGrids(input: PixelInput, dims: Record<string, number>): void {
  const m = dims['merge_size'] ?? 1;
  normaliseGrid((input as QwenPixelInput).grid).forEach((g, i) => {
    if (g.h % m || g.w % m)
      throw new TesseraError(
        'ERR_INVALID_ARGUMENT',
        `encodePixels: grid ${i} (${g.t}, ${g.h}, ${g.w}) does not fit this tower: h and w must be multiples of its merge_size ${m}`,
      );
  });
}

function qwenPreprocessor(
  config: Record<string, unknown> | undefined,
  where: string,
  dims: Record<string, number>,
  tokensOf: (patches: number) => number,
): Preprocessor {
  if (!config) throw new TesseraError('ERR_MODEL_NOT_FOUND', `${where}: no preprocessor_config.json (needed to size images)`);
  const cfg = parseQwenPreprocessConfig(config, `${where} (preprocessor config)`);
  checkGeometry(where, [
    ['patch_size', cfg.patchSize, 'patch_size', dims['patch_size']],
    ['temporal_patch_size', cfg.temporalPatchSize, 'temporal_patch_size', dims['temporal_patch_size']],
    ['merge_size', cfg.mergeSize, 'spatial_merge_size', dims['merge_size']],
  ]);
  return {
    plan: (size, opts) => {
      const p = planQwen(size, cfg, opts);
      return { resized: p.resized, grid: p.grid, patches: p.patches, tokens: tokensOf(p.patches) };
    },
    run: async (input, opts) => {
      const r = await preprocessQwen(input, cfg, opts);
      return { pixelValues: r.pixelValues, grid: r.grid, patches: r.patches, tokens: tokensOf(r.patches), decoded: r.decoded, resized: r.resized, timings: r.timings };
    },
  };
}

/** The pixel budget as a preprocessor_config.json states it (either spelling), for `tessera inspect`. */
function describeQwenSizing(_spec: TowerSpec, pre: Record<string, unknown> | undefined): string {
  const size = pre?.['size'] as { shortest_edge?: number; longest_edge?: number } | undefined;
  return `min ${pre?.['min_pixels'] ?? size?.shortest_edge ?? '?'} / max ${pre?.['max_pixels'] ?? size?.longest_edge ?? '?'} pixels`;
}

/** An HF reference's input: pixel_values (f32) and image_grid_thw (i64 [t, h, w]). */
function qwenReferenceInput(tensor: (name: string) => Uint8Array): ReferenceInput {
  const pixelValues = new Float32Array(tensor('pixel_values').slice().buffer);
  const [t, h, w] = Array.from(new BigInt64Array(tensor('image_grid_thw').slice().buffer), Number);
  const input: QwenPixelInput = { pixelValues, grid: { t: t!, h: h!, w: w! } };
  return { input, patches: t! * h! * w! };
}

/** The image side of a Qwen-processor family, as TowerFamily.images. @internal */
export const QWEN_IMAGES = {
  preprocessor: qwenPreprocessor,
  // Qwen's processor defaults are Qwen2-VL's; a checkpoint always states its own, and sizing by another
  // checkpoint's budget would be silently wrong: without a config only encodePixels works.
  defaultsSuffice: false,
  sizingKeys: QWEN_SIZING_KEYS,
  describeSizing: describeQwenSizing,
} satisfies TowerFamily['images'];

/** @internal */
export const QWEN_PIXEL_INPUTS = { schema: QWEN_PIXEL_INPUT, check: checkQwenGrids, fromReference: qwenReferenceInput } satisfies TowerFamily['pixelInput'];
