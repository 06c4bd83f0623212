// Qwen3.5 / Qwen3-VL: config.json or a llama.cpp mmproj → TowerSpec (docs/models/qwen-vision.md#config, #tensors,
// #llamacpp-mmproj). Defaults are HF's class defaults, so a config that omits a field means what it means to
// transformers.
import { z } from 'zod';
import { TesseraError } from '../../errors.js';
import { type GgufHeader, ggufBoolArray, ggufKind, ggufNumber, ggufNumberArray } from '../../formats/gguf.js';
import type { HfFolder } from '../../formats/hf-folder.js';
import { configError } from '../../spec/tensors.js';
import { headSplitProblem } from '../../spec/rules.js';
import { ggufPicker, hfPicker, LLAMACPP_LAYOUT, ollamaQwen3vlLayout, QWEN3_PROJECTORS, type QwenPicker, qwenStages, type QwenStageLayout, readQwenGguf } from '../qwen-common.js';
import type { SourceKind, TowerSpec } from '../../spec/types.js';
import type { Assert, Equals } from '../../type-equality.js';

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/** The vision activations Qwen's configs name (both the tanh GELU's spellings). */
export const QWEN_ACTIVATIONS = ['gelu_pytorch_tanh', 'gelu'] as const;

/** config.json's vision_config as parsed: HF's class defaults filled in, `heads` resolved. */
export interface QwenVisionConfig {
  /** Blocks (27). */
  depth: number;
  /** Width of a patch row inside the blocks (1152). */
  hidden_size: number;
  /** Attention heads, under either of the two names configs use; `heads` is the one that counts. */
  num_heads?: number;
  num_attention_heads?: number;
  /** Width of a block's MLP (4304). */
  intermediate_size: number;
  hidden_act: (typeof QWEN_ACTIVATIONS)[number];
  in_channels: number;
  /** Side of a square patch in pixels (16), frames per patch (2), patches merged per side (2). */
  patch_size: number;
  temporal_patch_size: number;
  spatial_merge_size: number;
  /** Width of an output token: the text model's hidden size (3584). */
  out_hidden_size: number;
  /** Rows of the learned position table (2304). */
  num_position_embeddings: number;
  /** Blocks whose output a deepstack merger also takes (Qwen3-VL). */
  deepstack_visual_indexes?: number[];
  rope_parameters?: { rope_type?: string; rope_theta?: number };
  /** Attention heads: num_heads, else num_attention_heads, else 16. */
  heads: number;
}

/** @internal */
export const QwenVisionConfigSchema = z
  .object({
    depth: int(1, 256).default(27),
    hidden_size: int(8, 16384).default(1152),
    num_heads: int(1, 256).optional(),
    num_attention_heads: int(1, 256).optional(),
    intermediate_size: int(1, 131072).default(4304),
    hidden_act: z.enum(QWEN_ACTIVATIONS).default('gelu_pytorch_tanh'),
    in_channels: int(1, 16).default(3),
    patch_size: int(1, 128).default(16),
    temporal_patch_size: int(1, 16).default(2),
    spatial_merge_size: int(1, 8).default(2),
    out_hidden_size: int(1, 65536).default(3584),
    num_position_embeddings: int(1, 1 << 20).default(2304),
    deepstack_visual_indexes: z.array(int(0, 255)).optional(),
    rope_parameters: z
      .object({ rope_type: z.string().default('axial'), rope_theta: z.number().positive().default(10000) })
      .partial()
      .optional(),
  })
  .transform((c, ctx) => {
    const heads = c.num_heads ?? c.num_attention_heads ?? 16;
    const split = headSplitProblem(c.hidden_size, heads);
    if (split) ctx.addIssue({ code: 'custom', path: ['num_heads'], message: `hidden_size ${split}` });
    if ((c.rope_parameters?.rope_type ?? 'axial') !== 'axial')
      ctx.addIssue({ code: 'custom', path: ['rope_parameters', 'rope_type'], message: 'only "axial" vision rope exists' });
    return { ...c, heads };
  });

type _QwenVisionConfigAgrees = Assert<Equals<z.output<typeof QwenVisionConfigSchema>, QwenVisionConfig>>;

/** The TowerSpec.family values this folder serves: Qwen3.5 (and its MoE's tower) has no deepstack, Qwen3-VL has. */
export const QWEN3_IDS = ['qwen3_5', 'qwen3_vl'] as const;
export type Qwen3Id = (typeof QWEN3_IDS)[number];

/** config.json model_type → family: the full model's, and the tower's saved on its own (config = vision_config). */
const FULL_MODEL_TYPES: Record<string, Qwen3Id> = { qwen3_5: 'qwen3_5', qwen3_5_moe: 'qwen3_5', qwen3_vl: 'qwen3_vl' };
const TOWER_MODEL_TYPES: Record<string, Qwen3Id> = {
  qwen3_5_vision: 'qwen3_5',
  qwen3_5_moe_vision: 'qwen3_5',
  qwen3_vl_vision: 'qwen3_vl',
};
export const QWEN3_MODEL_TYPES = [...Object.keys(FULL_MODEL_TYPES), ...Object.keys(TOWER_MODEL_TYPES)];


export type { QwenStageLayout };

/** The tower's tensors, stage by stage in execution order (docs/models/qwen-vision.md#tensors). */
export function qwenTowerLayout(c: QwenVisionConfig, deepstack: readonly number[]): QwenStageLayout[] {
  const D = c.hidden_size, I = c.intermediate_size, O = c.out_hidden_size, W = D * c.spatial_merge_size ** 2;
  const P = c.patch_size, T = c.temporal_patch_size;
  const mergerTensors = (normWidth: number): [string, number[]][] => [
    ['norm.weight', [normWidth]],
    ['norm.bias', [normWidth]],
    ['linear_fc1.weight', [W, W]],
    ['linear_fc1.bias', [W]],
    ['linear_fc2.weight', [O, W]],
    ['linear_fc2.bias', [O]],
  ];
  const stages: QwenStageLayout[] = [
    {
      name: 'embed', kind: 'embed', index: 0, base: '',
      tensors: [
        ['patch_embed.proj.weight', [D, c.in_channels, T, P, P]],
        ['patch_embed.proj.bias', [D]],
        ['pos_embed.weight', [c.num_position_embeddings, D]],
      ],
    },
  ];
  for (let l = 0; l < c.depth; l++) {
    stages.push({
      name: `block.${l}`, kind: 'block', index: l, base: `blocks.${l}.`,
      tensors: [
        ['norm1.weight', [D]],
        ['norm1.bias', [D]],
        ['attn.qkv.weight', [3 * D, D]],
        ['attn.qkv.bias', [3 * D]],
        ['attn.proj.weight', [D, D]],
        ['attn.proj.bias', [D]],
        ['norm2.weight', [D]],
        ['norm2.bias', [D]],
        ['mlp.linear_fc1.weight', [I, D]],
        ['mlp.linear_fc1.bias', [I]],
        ['mlp.linear_fc2.weight', [D, I]],
        ['mlp.linear_fc2.bias', [D]],
      ],
    });
    deepstack.forEach((at, k) => {
      if (at === l) stages.push({ name: `deepstack.${k}`, kind: 'deepstack', index: k, base: `deepstack_merger_list.${k}.`, tensors: mergerTensors(W) });
    });
  }
  stages.push({ name: 'merged', kind: 'merger', index: 0, base: 'merger.', tensors: mergerTensors(D) });
  return stages;
}

export function buildQwenSpec(folder: HfFolder): TowerSpec {
  const { config, index } = folder;
  const modelType = config['model_type'] as string;
  const family = FULL_MODEL_TYPES[modelType] ?? TOWER_MODEL_TYPES[modelType]!;
  const standalone = modelType in TOWER_MODEL_TYPES;
  const raw = standalone ? config : config['vision_config'];
  if (typeof raw !== 'object' || raw === null)
    throw new TesseraError('ERR_CONFIG_INVALID', `${folder.dir}/config.json: field 'vision_config': required for model_type ${modelType}`);
  const parsed = QwenVisionConfigSchema.safeParse(raw);
  if (!parsed.success) throw configError(`${folder.dir}/config.json (vision_config)`, parsed.error);
  const c = parsed.data;

  const textHidden = (config['text_config'] as Record<string, unknown> | undefined)?.['hidden_size'];
  if (typeof textHidden === 'number' && textHidden !== c.out_hidden_size)
    throw new TesseraError(
      'ERR_CONFIG_INVALID',
      `${folder.dir}/config.json: field 'vision_config.out_hidden_size': ${c.out_hidden_size} differs from text_config.hidden_size ${textHidden}`,
    );

  // Qwen3-VL's towers feed deepstack mergers (HF's default levels when the config states none); Qwen3.5's do not.
  const deepstack = family === 'qwen3_vl' ? (c.deepstack_visual_indexes ?? [8, 16, 24]) : [];
  deepstack.forEach((l, k) => {
    if (l >= c.depth || deepstack.indexOf(l) !== k)
      throw new TesseraError(
        'ERR_CONFIG_INVALID',
        `${folder.dir}/config.json: field 'vision_config.deepstack_visual_indexes': ${l} is out of range or repeated (depth ${c.depth})`,
      );
  });

  return qwen3Spec(family, 'hf-folder', c, 1e-6, deepstack, index.files, hfPicker(index));
}

/** The TowerSpec of a Qwen3 tower: its config, deepstack levels, and each stage's tensors found by `pick`. */
function qwen3Spec(family: Qwen3Id, source: SourceKind, c: QwenVisionConfig, eps: number, deepstack: number[], files: string[], pick: QwenPicker): TowerSpec {
  const D = c.hidden_size;
  return {
    family,
    source,
    dims: {
      depth: c.depth,
      hidden: D,
      heads: c.heads,
      head_dim: D / c.heads,
      intermediate: c.intermediate_size,
      out_hidden: c.out_hidden_size,
      in_channels: c.in_channels,
      patch_size: c.patch_size,
      temporal_patch_size: c.temporal_patch_size,
      merge_size: c.spatial_merge_size,
      pos_side: Math.floor(Math.sqrt(c.num_position_embeddings)),
      eps,
      rope_theta: c.rope_parameters?.rope_theta ?? 10000,
      mlp_act_erf: c.hidden_act === 'gelu' ? 1 : 0,
    },
    lists: { deepstack_indexes: deepstack },
    files,
    stages: qwenStages(qwenTowerLayout(c, deepstack), pick),
  };
}

// ---------------------------------------------------------------- llama.cpp mmproj

/**
 * Ollama's single files (the text model and the tower in one; each MoE's text model under its own name): Qwen3-VL's
 * and Qwen3.5's, whose converters (convert_qwen3vl.go, convert_qwen3next.go) lay the tower out alike. Qwen3.5's
 * tower has no deepstack mergers.
 */
const OLLAMA_ARCHS = ['qwen3vl', 'qwen3vlmoe', 'qwen35', 'qwen35moe'];
const OLLAMA_QWEN35_ARCHS = ['qwen35', 'qwen35moe'];

/** Whether a GGUF file is a Qwen3-VL or Qwen3.5 mmproj, or Ollama's single Qwen3-VL or Qwen3.5 file. */
export function isQwen3Gguf(h: GgufHeader): boolean {
  const { arch, projector } = ggufKind(h);
  return (arch === 'clip' && (QWEN3_PROJECTORS as readonly string[]).includes(projector ?? '')) || OLLAMA_ARCHS.includes(arch ?? '');
}

/**
 * A Qwen3-VL / Qwen3.5 GGUF file → TowerSpec. A llama.cpp mmproj (projector qwen3vl_merger, both towers) marks
 * its deepstack blocks in clip.vision.is_deepstack_layers; Ollama's qwen3vl file lists them in
 * <arch>.vision.deepstack_visual_indexes (its qwen35 file an empty list) and states the rope theta. The two towers differ only in Qwen3-VL's
 * deepstack mergers, as in HF (where model_type tells them): a file with any is Qwen3-VL, else Qwen3.5. Both use
 * the tanh GELU (llama.cpp's clip.use_gelu); sizes come from the tensors' shapes.
 */
export function buildQwen3FromGguf(h: GgufHeader): TowerSpec {
  const { arch } = ggufKind(h);
  const ollama = OLLAMA_ARCHS.includes(arch ?? '');
  if (ollama && ![...h.tensors.keys()].some((n) => n.startsWith('v.')))
    throw new TesseraError(
      'ERR_MODEL_FORMAT',
      `${h.path}: this ${arch} GGUF holds no vision tower (no v.* tensors): open the file that has it (Ollama's single-file model, or the projector GGUF written beside this one)`,
    );
  const layout = ollama ? ollamaQwen3vlLayout(arch!) : LLAMACPP_LAYOUT;
  const g = readQwenGguf(h, layout);
  let deepstack: number[];
  if (ollama) {
    deepstack = [...(ggufNumberArray(h, `${layout.keys}deepstack_visual_indexes`) ?? [])];
    if (deepstack.length && OLLAMA_QWEN35_ARCHS.includes(arch!))
      throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${layout.keys}deepstack_visual_indexes' lists blocks, but a Qwen3.5 tower (${arch}) has no deepstack mergers`);
    deepstack.forEach((l, k) => {
      if (!Number.isInteger(l) || l < 0 || l >= g.depth || deepstack.indexOf(l) !== k)
        throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${layout.keys}deepstack_visual_indexes': ${l} is out of range or repeated (depth ${g.depth})`);
    });
  } else {
    const marks = ggufBoolArray(h, 'clip.vision.is_deepstack_layers') ?? [];
    if (marks.length > g.depth)
      throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata 'clip.vision.is_deepstack_layers' marks ${marks.length} blocks, the tower has ${g.depth}`);
    deepstack = marks.flatMap((on, l) => (on ? [l] : []));
  }
  const posName = `${layout.modules['embed']!['pos_embed']}.weight`;
  const pos = g.index.tensors.get(posName);
  if (!pos) throw new TesseraError('ERR_TENSOR_MISSING', `${h.path}: tower tensor '${posName}' is missing ([positions, ${g.hidden}])`);
  const theta = ollama ? (ggufNumber(h, `${layout.keys}rope.freq_base`) ?? 10000) : 10000;
  if (!(theta > 0)) throw new TesseraError('ERR_CONFIG_INVALID', `${h.path}: metadata '${layout.keys}rope.freq_base' = ${theta} is out of range`);
  const c: QwenVisionConfig = {
    depth: g.depth,
    hidden_size: g.hidden,
    num_heads: g.heads,
    intermediate_size: g.intermediate,
    hidden_act: 'gelu_pytorch_tanh',
    in_channels: g.inChannels,
    patch_size: g.patchSize,
    temporal_patch_size: 2,
    spatial_merge_size: g.merge,
    out_hidden_size: g.outHidden,
    num_position_embeddings: pos.shape[0]!,
    deepstack_visual_indexes: deepstack,
    rope_parameters: { rope_type: 'axial', rope_theta: theta },
    heads: g.heads,
  };
  return qwen3Spec(deepstack.length ? 'qwen3_vl' : 'qwen3_5', layout.source, c, g.eps, deepstack, [h.path], ggufPicker(g, deepstack));
}
