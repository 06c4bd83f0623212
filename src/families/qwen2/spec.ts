// Qwen2-VL and Qwen2.5-VL: config.json or a llama.cpp mmproj → TowerSpec (docs/models/qwen2-vision.md#config,
// #tensors, #llamacpp-mmproj). Both towers share the patch embedding, the 2D rope and the 2x2 merger; they
// differ in the block (LayerNorm + QuickGELU MLP, or RMSNorm + gated SiLU MLP with window attention) and in the
// merger's norm. Defaults are HF's class defaults (transformers 5.17), so a config that omits a field means what
// it means to transformers.
//
// The spec the native towers read:
//   dims: depth, hidden D, heads, head_dim, intermediate I, out_hidden O, in_channels C, patch_size P,
//         temporal_patch_size T, merge_size, eps, rope_theta, window (merged tokens per window side;
//         0: no window attention)
//   lists: fullatt_blocks (the blocks attending over the whole image; empty for Qwen2-VL)
//   stages: embed (patch_embed.proj.weight [D, C, T, P, P], no bias), block.N (base blocks.N.), merged
//           (kind merger, base merger.): see QWEN2_TOWERS for each family's roles.
import { z } from 'zod';
import { TesseraError } from '../../errors.js';
import { type GgufHeader, ggufBool, ggufKind, ggufNumber, ggufNumberArray } from '../../formats/gguf.js';
import type { HfFolder } from '../../formats/hf-folder.js';
import { headSplitProblem } from '../../spec/rules.js';
import type { SourceKind, TowerSpec } from '../../spec/types.js';
import { ggufPicker, hfPicker, LLAMACPP_LAYOUT, OLLAMA_QWEN25VL_LAYOUT, QWEN2_PROJECTORS, type QwenPicker, qwenStages, type QwenStageLayout, readQwenGguf } from '../qwen-common.js';

/** The TowerSpec.family values this folder serves. */
export const QWEN2_IDS = ['qwen2_vl', 'qwen2_5_vl'] as const;
export type Qwen2Id = (typeof QWEN2_IDS)[number];

/** config.json model_type → family: the full model's, and the tower's saved on its own (config = vision_config). */
const FULL_MODEL_TYPES: Record<string, Qwen2Id> = { qwen2_vl: 'qwen2_vl', qwen2_5_vl: 'qwen2_5_vl' };
const TOWER_MODEL_TYPES: Record<string, Qwen2Id> = { qwen2_vl_vision: 'qwen2_vl', qwen2_5_vl_vision: 'qwen2_5_vl' };
export const QWEN2_MODEL_TYPES = [...Object.keys(FULL_MODEL_TYPES), ...Object.keys(TOWER_MODEL_TYPES)];

const int = (min: number, max: number) => z.number().int().min(min).max(max);
/** The vision rope's theta when the config states none (HF's VisionRotaryEmbedding default). */
const ROPE_THETA = 10000;
const rope = z.object({ rope_type: z.string().optional(), rope_theta: z.number().positive().optional() }).optional();

/** Qwen2VLVisionConfig: `embed_dim` is the blocks' width, `hidden_size` the output's, the MLP embed_dim x mlp_ratio. */
const Qwen2VisionSchema = z.object({
  depth: int(1, 256).default(32),
  embed_dim: int(8, 16384).default(1280),
  hidden_size: int(1, 65536).default(3584),
  hidden_act: z.literal('quick_gelu', { message: 'Qwen2-VL towers use quick_gelu' }).default('quick_gelu'),
  mlp_ratio: z.number().positive().max(64).default(4),
  num_heads: int(1, 256).default(16),
  in_channels: int(1, 16).default(3),
  patch_size: int(1, 128).default(14),
  spatial_merge_size: int(1, 8).default(2),
  temporal_patch_size: int(1, 16).default(2),
  rope_parameters: rope,
});

/** Qwen2_5_VLVisionConfig: `hidden_size` is the blocks' width, `out_hidden_size` the output's. */
const Qwen25VisionSchema = z.object({
  depth: int(1, 256).default(32),
  hidden_size: int(8, 16384).default(3584),
  hidden_act: z.literal('silu', { message: 'Qwen2.5-VL towers use silu' }).default('silu'),
  intermediate_size: int(1, 131072).default(3420),
  num_heads: int(1, 256).default(16),
  in_channels: int(1, 16).default(3),
  patch_size: int(1, 128).default(14),
  spatial_merge_size: int(1, 8).default(2),
  temporal_patch_size: int(1, 16).default(2),
  window_size: int(1, 1 << 16).default(112),
  out_hidden_size: int(1, 65536).default(3584),
  fullatt_block_indexes: z.array(int(0, 1 << 16)).default([7, 15, 23, 31]),
  rope_parameters: rope,
});

/** The towers' dimensions once read, whichever config spelt them. */
export interface Qwen2Dims {
  depth: number;
  hidden: number;
  heads: number;
  intermediate: number;
  out_hidden: number;
  in_channels: number;
  patch_size: number;
  temporal_patch_size: number;
  merge_size: number;
  rope_theta: number;
  /** Merged tokens per window side (Qwen2.5-VL), 0 without window attention. */
  window: number;
}

type Roles = [role: string, shape: number[]][];

/** What differs between the two towers: the block's and the merger's tensors (HF's names), by family. */
export const QWEN2_TOWERS: Record<Qwen2Id, { block(d: Qwen2Dims): Roles; mergerNorm(d: Qwen2Dims): Roles }> = {
  qwen2_vl: {
    // LayerNorm (weight, bias), attention, LayerNorm, fc1 → QuickGELU → fc2.
    block: ({ hidden: D, intermediate: I }) => [
      ['norm1.weight', [D]],
      ['norm1.bias', [D]],
      ...attention(D),
      ['norm2.weight', [D]],
      ['norm2.bias', [D]],
      ['mlp.fc1.weight', [I, D]],
      ['mlp.fc1.bias', [I]],
      ['mlp.fc2.weight', [D, I]],
      ['mlp.fc2.bias', [D]],
    ],
    mergerNorm: ({ hidden: D }) => [
      ['ln_q.weight', [D]],
      ['ln_q.bias', [D]],
    ],
  },
  qwen2_5_vl: {
    // RMSNorm (weight only), attention, RMSNorm, down(SiLU(gate) * up), every linear with a bias.
    block: ({ hidden: D, intermediate: I }) => [
      ['norm1.weight', [D]],
      ['norm2.weight', [D]],
      ...attention(D),
      ['mlp.gate_proj.weight', [I, D]],
      ['mlp.gate_proj.bias', [I]],
      ['mlp.up_proj.weight', [I, D]],
      ['mlp.up_proj.bias', [I]],
      ['mlp.down_proj.weight', [D, I]],
      ['mlp.down_proj.bias', [D]],
    ],
    mergerNorm: ({ hidden: D }) => [['ln_q.weight', [D]]],
  },
};

function attention(D: number): Roles {
  return [
    ['attn.qkv.weight', [3 * D, D]],
    ['attn.qkv.bias', [3 * D]],
    ['attn.proj.weight', [D, D]],
    ['attn.proj.bias', [D]],
  ];
}

/** The tower's tensors, stage by stage in execution order (docs/models/qwen2-vision.md#tensors). */
export function qwen2TowerLayout(family: Qwen2Id, d: Qwen2Dims): QwenStageLayout[] {
  const D = d.hidden, W = D * d.merge_size ** 2, P = d.patch_size;
  const tower = QWEN2_TOWERS[family];
  const stages: QwenStageLayout[] = [
    { name: 'embed', kind: 'embed', index: 0, base: '', tensors: [['patch_embed.proj.weight', [D, d.in_channels, d.temporal_patch_size, P, P]]] },
  ];
  for (let l = 0; l < d.depth; l++) stages.push({ name: `block.${l}`, kind: 'block', index: l, base: `blocks.${l}.`, tensors: tower.block(d) });
  stages.push({
    name: 'merged', kind: 'merger', index: 0, base: 'merger.',
    tensors: [...tower.mergerNorm(d), ['mlp.0.weight', [W, W]], ['mlp.0.bias', [W]], ['mlp.2.weight', [d.out_hidden, W]], ['mlp.2.bias', [d.out_hidden]]],
  });
  return stages;
}

/**
 * A vision_config object → the towers' dimensions and full-attention blocks, or ERR_CONFIG_INVALID naming the
 * field (`where` is the file, `field` the prefix of its fields: 'vision_config.' or '').
 */
export function readQwen2VisionConfig(family: Qwen2Id, raw: unknown, where: string, field: string): { dims: Qwen2Dims; fullatt: number[] } {
  const fail = (name: string, why: string): never => {
    throw new TesseraError('ERR_CONFIG_INVALID', `${where}: field '${field}${name}': ${why}`);
  };
  const schemaFail = (err: z.ZodError): never => {
    const issue = err.issues[0]!;
    return fail(issue.path.join('.') || '(root)', issue.message);
  };
  let dims: Qwen2Dims;
  let fullatt: number[] = [];
  let ropeType: string | undefined;
  if (family === 'qwen2_vl') {
    const r = Qwen2VisionSchema.safeParse(raw);
    if (!r.success) return schemaFail(r.error);
    const c = r.data;
    const intermediate = c.embed_dim * c.mlp_ratio;
    if (!Number.isInteger(intermediate)) fail('mlp_ratio', `embed_dim ${c.embed_dim} x mlp_ratio ${c.mlp_ratio} is not a whole MLP width`);
    dims = {
      depth: c.depth, hidden: c.embed_dim, heads: c.num_heads, intermediate, out_hidden: c.hidden_size, in_channels: c.in_channels,
      patch_size: c.patch_size, temporal_patch_size: c.temporal_patch_size, merge_size: c.spatial_merge_size,
      rope_theta: c.rope_parameters?.rope_theta ?? ROPE_THETA, window: 0,
    };
    ropeType = c.rope_parameters?.rope_type;
    const split = headSplitProblem(c.embed_dim, c.num_heads);
    if (split) fail('num_heads', `embed_dim ${split}`);
  } else {
    const r = Qwen25VisionSchema.safeParse(raw);
    if (!r.success) return schemaFail(r.error);
    const c = r.data;
    const side = c.patch_size * c.spatial_merge_size;
    if (c.window_size % side !== 0)
      fail('window_size', `${c.window_size} is not a multiple of patch_size x spatial_merge_size (${c.patch_size} x ${c.spatial_merge_size} = ${side})`);
    c.fullatt_block_indexes.forEach((b, k) => {
      if (b >= c.depth || c.fullatt_block_indexes.indexOf(b) !== k)
        fail('fullatt_block_indexes', `${b} is ${b >= c.depth ? `not a block (depth ${c.depth})` : 'repeated'}`);
    });
    fullatt = [...c.fullatt_block_indexes];
    dims = {
      depth: c.depth, hidden: c.hidden_size, heads: c.num_heads, intermediate: c.intermediate_size, out_hidden: c.out_hidden_size,
      in_channels: c.in_channels, patch_size: c.patch_size, temporal_patch_size: c.temporal_patch_size, merge_size: c.spatial_merge_size,
      rope_theta: c.rope_parameters?.rope_theta ?? ROPE_THETA, window: c.window_size / side,
    };
    ropeType = c.rope_parameters?.rope_type;
    const split = headSplitProblem(c.hidden_size, c.num_heads);
    if (split) fail('num_heads', `hidden_size ${split}`);
  }
  if ((ropeType ?? 'axial') !== 'axial') fail('rope_parameters.rope_type', 'only "axial" vision rope exists');
  return { dims, fullatt };
}

export function buildQwen2Spec(folder: HfFolder): TowerSpec {
  const { config, index } = folder;
  const modelType = config['model_type'] as string;
  const family = FULL_MODEL_TYPES[modelType] ?? TOWER_MODEL_TYPES[modelType]!;
  const standalone = modelType in TOWER_MODEL_TYPES;
  const raw = standalone ? config : config['vision_config'];
  const where = `${folder.dir}/config.json`;
  if (typeof raw !== 'object' || raw === null) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: field 'vision_config': required for model_type ${modelType}`);
  const { dims: d, fullatt } = readQwen2VisionConfig(family, raw, where, standalone ? '' : 'vision_config.');

  // The output feeds the text model: its width must be the text model's (text_config, or the top level of
  // older Hub configs that keep the text model's fields there).
  if (!standalone) {
    const text = config['text_config'] as Record<string, unknown> | undefined;
    const textHidden = text?.['hidden_size'] ?? config['hidden_size'];
    const outField = family === 'qwen2_vl' ? 'vision_config.hidden_size' : 'vision_config.out_hidden_size';
    if (typeof textHidden === 'number' && textHidden !== d.out_hidden)
      throw new TesseraError('ERR_CONFIG_INVALID', `${where}: field '${outField}': ${d.out_hidden} differs from the text model's hidden_size ${textHidden}`);
  }

  return qwen2Spec(family, 'hf-folder', d, 1e-6, fullatt, index.files, hfPicker(index));
}

/** The TowerSpec of a Qwen2 tower: its dimensions, full-attention blocks, and each stage's tensors found by `pick`. */
function qwen2Spec(family: Qwen2Id, source: SourceKind, d: Qwen2Dims, eps: number, fullatt: number[], files: string[], pick: QwenPicker): TowerSpec {
  return {
    family,
    source,
    dims: {
      depth: d.depth,
      hidden: d.hidden,
      heads: d.heads,
      head_dim: d.hidden / d.heads,
      intermediate: d.intermediate,
      out_hidden: d.out_hidden,
      in_channels: d.in_channels,
      patch_size: d.patch_size,
      temporal_patch_size: d.temporal_patch_size,
      merge_size: d.merge_size,
      eps,
      rope_theta: d.rope_theta,
      window: d.window,
    },
    lists: { fullatt_blocks: fullatt },
    files,
    stages: qwenStages(qwen2TowerLayout(family, d), pick),
  };
}

// ---------------------------------------------------------------- llama.cpp mmproj

/**
 * What llama.cpp assumes of every Qwen2.5-VL tower and its converter never writes (docs/models/qwen2-vision.md#llamacpp-mmproj):
 * the attention window, in pixels.
 */
const GGUF_WINDOW_PX = 112;

/** Whether a GGUF file is a Qwen2-VL or Qwen2.5-VL mmproj, or Ollama's single Qwen2.5-VL file. */
export function isQwen2Gguf(h: GgufHeader): boolean {
  const { arch, projector } = ggufKind(h);
  return (arch === 'clip' && (QWEN2_PROJECTORS as readonly string[]).includes(projector ?? '')) || arch === OLLAMA_ARCH;
}

/** Ollama's Qwen2.5-VL file (the text model and the tower in one). */
const OLLAMA_ARCH = 'qwen25vl';
/** The full-attention blocks Ollama's runtime assumes when its file's list is missing or empty (every checkpoint's). */
const OLLAMA_FULLATT_DEFAULT = [7, 15, 23, 31];

/** Older Qwen2.5-VL mmprojs say qwen2vl_merger and mark the tower with these keys (clip. or clip.vision.). */
function legacyKey<T>(h: GgufHeader, read: (h: GgufHeader, k: string) => T | undefined, k: string): T | undefined {
  return read(h, `clip.vision.${k}`) ?? read(h, `clip.${k}`);
}

/**
 * A Qwen2-VL / Qwen2.5-VL GGUF file → TowerSpec. A llama.cpp mmproj is Qwen2.5-VL for the projector
 * qwen2.5vl_merger, or an older file's qwen2vl_merger with a gated MLP (ffn_gate) or the keys use_glu_mlp /
 * use_rms_norm / fullatt_block_indexes; its window is llama.cpp's assumption (112 px) and its full-attention
 * blocks every n_wa_pattern-th (an older file's fullatt_block_indexes as stated). Ollama's qwen25vl file states
 * both (qwen25vl.vision.window_size, .fullatt_block_indexes). Sizes come from tensor shapes.
 */
export function buildQwen2FromGguf(h: GgufHeader): TowerSpec {
  const { arch } = ggufKind(h);
  const ollama = arch === OLLAMA_ARCH;
  if (ollama && ![...h.tensors.keys()].some((n) => n.startsWith('v.')))
    throw new TesseraError('ERR_MODEL_FORMAT', `${h.path}: this ${OLLAMA_ARCH} GGUF holds no vision tower (no v.* tensors)`);
  const g = readQwenGguf(h, ollama ? OLLAMA_QWEN25VL_LAYOUT : LLAMACPP_LAYOUT);
  const where = h.path;
  const pre = g.layout.keys;
  const legacy25 =
    g.index.tensors.has('v.blk.0.ffn_gate.weight') ||
    legacyKey(h, ggufBool, 'use_glu_mlp') === true ||
    legacyKey(h, ggufBool, 'use_rms_norm') === true ||
    legacyKey(h, ggufNumberArray, 'fullatt_block_indexes') !== undefined;
  const family: Qwen2Id = ollama || ggufKind(h).projector === 'qwen2.5vl_merger' || legacy25 ? 'qwen2_5_vl' : 'qwen2_vl';
  let window = 0;
  let fullatt: number[] = [];
  if (family === 'qwen2_5_vl') {
    const side = g.patchSize * g.merge;
    const px = (ollama ? ggufNumber(h, `${pre}window_size`) : legacyKey(h, ggufNumber, 'window_size')) ?? GGUF_WINDOW_PX;
    if (!Number.isInteger(px) || px < side || px % side !== 0)
      throw new TesseraError('ERR_CONFIG_INVALID', `${where}: an attention window of ${px} px is not a whole number of ${side}-px merge windows (patch ${g.patchSize} x merge ${g.merge})`);
    window = px / side;
    const every = ggufNumber(h, 'clip.vision.n_wa_pattern');
    if (ollama) {
      // Ollama's runtime reads a missing or empty list (published files hold empty ones) as the checkpoints'.
      const stated = ggufNumberArray(h, `${pre}fullatt_block_indexes`);
      fullatt = stated?.length ? [...stated] : [...OLLAMA_FULLATT_DEFAULT];
    } else {
      const stated = legacyKey(h, ggufNumberArray, 'fullatt_block_indexes');
      if (stated) fullatt = [...stated];
      else if (every !== undefined) {
        if (!Number.isInteger(every) || every < 1) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata 'clip.vision.n_wa_pattern' = ${every} is out of range`);
        for (let l = every - 1; l < g.depth; l += every) fullatt.push(l);
      } else throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata 'clip.vision.n_wa_pattern' is missing (which blocks attend over the whole image)`);
    }
    fullatt.forEach((b, k) => {
      if (!Number.isInteger(b) || b < 0 || b >= g.depth || fullatt.indexOf(b) !== k)
        throw new TesseraError('ERR_CONFIG_INVALID', `${where}: full-attention block ${b} is ${b >= g.depth ? `not a block (depth ${g.depth})` : 'repeated'}`);
    });
  }
  const theta = ollama ? (ggufNumber(h, `${pre}rope.freq_base`) ?? ROPE_THETA) : ROPE_THETA;
  if (!(theta > 0)) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata '${pre}rope.freq_base' = ${theta} is out of range`);
  const d: Qwen2Dims = {
    depth: g.depth, hidden: g.hidden, heads: g.heads, intermediate: g.intermediate, out_hidden: g.outHidden, in_channels: g.inChannels,
    patch_size: g.patchSize, temporal_patch_size: 2, merge_size: g.merge, rope_theta: theta, window,
  };
  return qwen2Spec(family, g.layout.source, d, g.eps, fullatt, [h.path], ggufPicker(g));
}
