// Gemma 4 vision tower + projector → TowerSpec, from its three sources (docs/models/gemma4-vision.md):
// an HF folder (#config, #tensors), a llama.cpp mmproj GGUF (#llamacpp-mmproj) and an Ollama
// single-file GGUF (#ollama-single-file). All three become the same spec, so
// native/models/gemma4/tower.cc runs HF's forward pass (#forward-pass) whatever the file's origin
// (never llama.cpp's GELU_QUICK or Ollama's projector order).
//
// The spec the native model reads (every layout difference is stated here, never guessed there).
// Roles are HF's tensor names with the checkpoint prefix and the stage's base taken off, as for Qwen
// (docs/design.md#weight-names); a GGUF file's names are mapped to them here, the one sanitize step.
//   dims: hidden D, heads, head_dim, intermediate F, out_hidden T, depth L, eps, patch_size P,
//         pooling_kernel k, pos_rows (rows per axis table), rope_theta, standardize (0/1),
//         max_soft_tokens (the processor budget), and patch_kernel_chw: 0 when `input_proj.weight`
//         columns are (py, px, c) with c fastest (HF), 1 when they are (c, py, px) (GGUF conv kernel).
//   stages, in order (base, then roles):
//     embed      vision_tower.patch_embedder.: input_proj.weight [D, 3·P·P] (or [D, 3, P, P]),
//                position_embedding_table [2, pos_rows, D] (slice 0 = x)
//     block.i    vision_tower.encoder.layers.i.: input_layernorm / post_attention_layernorm /
//                pre_feedforward_layernorm / post_feedforward_layernorm .weight [D];
//                self_attn.{q,k,v}_proj.linear.weight [H·hd, D], self_attn.o_proj.linear.weight [D, H·hd];
//                self_attn.q_norm.weight / self_attn.k_norm.weight [hd];
//                mlp.{gate,up}_proj.linear.weight [F, D], mlp.down_proj.linear.weight [D, F];
//                clamps per linear <lin> (self_attn.q_proj, ..., mlp.down_proj), either form, each
//                optional (absent = ±inf):
//                  <lin>.input_min / .input_max / .output_min / .output_max  scalars (any dtype)
//                  <lin>.clamp  f32 [4] = in_min, in_max, out_min, out_max (Ollama's packed form,
//                               no HF name); all four zero = no clamp; when present and not all
//                               zero it takes precedence over the scalars
//                out_scale [1] (GGUF only, no HF name, optional): the block's output is multiplied by it
//     pooled     vision_tower.: std_bias / std_scale [D] (present iff standardize)
//     projected  embed_vision.: embedding_projection.weight [T, D]; optional embedding_projection.*
//                clamps in the same two forms (GGUF only)
import { z } from 'zod';

import { TesseraError } from '../../errors.js';
import {
  type GgufHeader,
  ggufKind,
  ggufNumber,
  ggufNumberArray,
  ggufTensorIndex,
} from '../../formats/gguf.js';
import type { HfFolder } from '../../formats/hf-folder.js';
import type { TensorIndex } from '../../formats/tensor-index.js';
import { parseGemmaPreprocessConfig } from '../../image/config.js';
import { headDimProblem } from '../../spec/rules.js';
import { configError, towerTensor } from '../../spec/tensors.js';
import type { SourceKind, StageSpec, TensorSpec, TowerSpec } from '../../spec/types.js';

const ROPE_THETA = 100; // docs/models/gemma4-vision.md#config: every checkpoint's value; GGUF files never store it (llama.cpp hardcodes it)
/** The image processor's class defaults (image/config.ts): what a source that states no processor settings gets. */
const PROCESSOR_DEFAULTS = parseGemmaPreprocessConfig({});

/** Each stage's base in an HF checkpoint: a tensor's role is its name after the base. */
const BASE = {
  embed: 'vision_tower.patch_embedder.',
  block: (i: number) => `vision_tower.encoder.layers.${i}.`,
  pooled: 'vision_tower.',
  projected: 'embed_vision.',
} as const;
/** The linears of a block: HF module path (the role stem) and GGUF tensor stem. */
const LINEARS = [
  { hf: 'self_attn.q_proj', gguf: 'attn_q' },
  { hf: 'self_attn.k_proj', gguf: 'attn_k' },
  { hf: 'self_attn.v_proj', gguf: 'attn_v' },
  { hf: 'self_attn.o_proj', gguf: 'attn_out' },
  { hf: 'mlp.gate_proj', gguf: 'ffn_gate' },
  { hf: 'mlp.up_proj', gguf: 'ffn_up' },
  { hf: 'mlp.down_proj', gguf: 'ffn_down' },
] as const;
const CLAMP_BOUNDS = ['input_min', 'input_max', 'output_min', 'output_max'] as const;
const NORMS = [
  { hf: 'input_layernorm.weight', gguf: 'ln1.weight' },
  { hf: 'post_attention_layernorm.weight', gguf: 'attn_post_norm.weight' },
  { hf: 'pre_feedforward_layernorm.weight', gguf: 'ln2.weight' },
  { hf: 'post_feedforward_layernorm.weight', gguf: 'ffn_post_norm.weight' },
] as const;
/** The rest of a block, and of the other stages: HF role and GGUF name. */
const Q_NORM = { hf: 'self_attn.q_norm.weight', gguf: 'attn_q_norm.weight' } as const;
const K_NORM = { hf: 'self_attn.k_norm.weight', gguf: 'attn_k_norm.weight' } as const;
const PATCH = { hf: 'input_proj.weight', gguf: 'v.patch_embd.weight' } as const;
const POSITIONS = { hf: 'position_embedding_table', gguf: 'v.position_embd.weight' } as const;
const STD_BIAS = { hf: 'std_bias', gguf: 'v.std_bias' } as const;
const STD_SCALE = { hf: 'std_scale', gguf: 'v.std_scale' } as const;
const PROJECTION = { lin: 'embedding_projection', gguf: 'mm.input_projection' } as const;
/** GGUF only (no HF tensor): a block's output scale. */
const OUT_SCALE = 'out_scale';

interface Dims {
  hidden: number;
  heads: number;
  head_dim: number;
  intermediate: number;
  out_hidden: number;
  depth: number;
  eps: number;
  patch_size: number;
  pooling_kernel: number;
  pos_rows: number;
  max_soft_tokens: number;
}

// ---------------------------------------------------------------- HF folder

const posInt = z.number().int().positive();

/** config.json → vision_config (Gemma4VisionConfig, transformers 5.17 defaults) and text width. */
const Gemma4ConfigSchema = z.object({
  model_type: z.literal('gemma4'),
  text_config: z.object({ hidden_size: posInt }).passthrough(),
  vision_config: z
    .object({
      hidden_size: posInt.default(768),
      intermediate_size: posInt.default(3072),
      num_hidden_layers: posInt.default(16),
      num_attention_heads: posInt.default(12),
      num_key_value_heads: posInt.optional(),
      head_dim: posInt.default(64),
      hidden_activation: z
        .enum(['gelu_pytorch_tanh', 'gelu_new'], { message: 'only the tanh GELU is supported' })
        .default('gelu_pytorch_tanh'),
      rms_norm_eps: z.number().positive().max(1e-2).default(1e-6),
      rope_parameters: z
        .object({
          rope_theta: z.number().positive().default(ROPE_THETA),
          rope_type: z.enum(['axial', 'default']).default('axial'),
        })
        .passthrough()
        .default({ rope_theta: ROPE_THETA, rope_type: 'axial' }),
      patch_size: posInt.max(64).default(PROCESSOR_DEFAULTS.patchSize),
      pooling_kernel_size: posInt.max(8).default(PROCESSOR_DEFAULTS.poolingKernelSize),
      position_embedding_size: posInt.default(10240),
      use_clipped_linears: z.boolean().default(false),
      standardize: z.boolean().default(false),
      attention_bias: z.literal(false, { message: 'the Gemma 4 tower has no attention biases' }).default(false),
    })
    .passthrough(),
});

/** The TowerSpec.family value, and the config.json model_type, of Gemma 4. */
export const GEMMA4_IDS = ['gemma4'] as const;
export const GEMMA4_MODEL_TYPES = ['gemma4'];

/** An HF folder (config.json, preprocessor_config.json, safetensors) → TowerSpec. */
export function buildGemma4Spec(folder: HfFolder): TowerSpec {
  const cfg = Gemma4ConfigSchema.safeParse(folder.config);
  if (!cfg.success) throw configError(`${folder.dir}/config.json`, cfg.error);
  // The processor settings as the image pipeline reads them (one schema, image/config.ts): the
  // budget. That its patch and pooling sizes are the tower's is checked where the preprocessor is
  // made (prepare.ts, for every source).
  const p = parseGemmaPreprocessConfig(folder.preprocessorConfig, `${folder.dir}/preprocessor_config.json`);
  const v = cfg.data.vision_config;
  const cfgFail = (what: string): never => {
    throw new TesseraError('ERR_CONFIG_INVALID', `${folder.dir}/config.json: ${what}`);
  };
  if (v.num_key_value_heads !== undefined && v.num_key_value_heads !== v.num_attention_heads)
    cfgFail(`vision_config.num_key_value_heads ${v.num_key_value_heads} differs from num_attention_heads ${v.num_attention_heads} (grouped-query vision attention is not supported)`);
  const headDimWhy = headDimProblem(v.head_dim);
  if (headDimWhy) cfgFail(`vision_config.${headDimWhy}`);

  const d: Dims = {
    hidden: v.hidden_size,
    heads: v.num_attention_heads,
    head_dim: v.head_dim,
    intermediate: v.intermediate_size,
    out_hidden: cfg.data.text_config.hidden_size,
    depth: v.num_hidden_layers,
    eps: v.rms_norm_eps,
    patch_size: v.patch_size,
    pooling_kernel: v.pooling_kernel_size,
    pos_rows: v.position_embedding_size,
    max_soft_tokens: p.maxSoftTokens,
  };

  // Checkpoints saved from Gemma4ForConditionalGeneration prefix everything with "model."; accept
  // the bare names too (a tower saved on its own).
  const index = folder.index;
  const prefix = index.tensors.has(`model.${BASE.embed}${PATCH.hf}`) ? 'model.' : '';
  const D = d.hidden, P = d.patch_size;
  // An HF tensor's name is the prefix, its stage's base and its role.
  const at = (base: string) => new Picker(index, prefix + base);

  const stages: StageSpec[] = [];
  const embed = at(BASE.embed);
  stages.push({
    name: 'embed', kind: 'embed', index: 0,
    tensors: [embed.need(PATCH.hf, PATCH.hf, [D, 3 * P * P]), embed.need(POSITIONS.hf, POSITIONS.hf, [2, d.pos_rows, D])],
  });
  const shapes = linearShapes(d);
  for (let i = 0; i < d.depth; i++) {
    const t = at(BASE.block(i));
    const tensors: TensorSpec[] = NORMS.map((n) => t.need(n.hf, n.hf, [D]));
    for (const l of LINEARS) {
      tensors.push(t.need(linearWeight(l.hf), linearWeight(l.hf), shapes[l.hf]));
      // Clamp scalars exist (and are used) only with use_clipped_linears; a missing one is ±inf.
      if (v.use_clipped_linears)
        for (const b of CLAMP_BOUNDS) t.maybe(tensors, `${l.hf}.${b}`, `${l.hf}.${b}`, [[]]);
    }
    tensors.push(t.need(Q_NORM.hf, Q_NORM.hf, [d.head_dim]));
    tensors.push(t.need(K_NORM.hf, K_NORM.hf, [d.head_dim]));
    stages.push({ name: `block.${i}`, kind: 'block', index: i, tensors });
  }
  const pooled = at(BASE.pooled);
  stages.push({
    name: 'pooled', kind: 'pooler', index: 0,
    tensors: v.standardize ? [pooled.need(STD_BIAS.hf, STD_BIAS.hf, [D]), pooled.need(STD_SCALE.hf, STD_SCALE.hf, [D])] : [],
  });
  const proj = `${PROJECTION.lin}.weight`;
  stages.push({
    name: 'projected', kind: 'projector', index: 0,
    tensors: [at(BASE.projected).need(proj, proj, [d.out_hidden, D])],
  });
  return finish('hf-folder', d, v.rope_parameters.rope_theta, v.standardize, false, index.files, stages);
}

/** A block linear's weight role: HF wraps each in a clippable module (`<lin>.linear.weight`). */
const linearWeight = (lin: string) => `${lin}.linear.weight`;

function linearShapes(d: Dims): Record<(typeof LINEARS)[number]['hf'], number[]> {
  const D = d.hidden, qd = d.heads * d.head_dim, F = d.intermediate;
  return {
    'self_attn.q_proj': [qd, D], 'self_attn.k_proj': [qd, D], 'self_attn.v_proj': [qd, D], 'self_attn.o_proj': [D, qd],
    'mlp.gate_proj': [F, D], 'mlp.up_proj': [F, D], 'mlp.down_proj': [D, F],
  };
}

/** Tensors by file name (under a prefix), checked and given a role by the shared towerTensor. */
class Picker {
  constructor(
    readonly index: TensorIndex,
    private readonly prefix = '',
  ) {}

  has(name: string): boolean {
    return this.index.tensors.has(this.prefix + name);
  }

  need(role: string, name: string, shape: number[]): TensorSpec {
    return towerTensor(this.index, this.prefix + name, role, shape);
  }

  /** Adds the tensor if present; `shapes` lists the accepted shapes (the first is the message's). */
  maybe(into: TensorSpec[], role: string, name: string, shapes: number[][]): void {
    const t = this.index.tensors.get(this.prefix + name);
    if (!t) return;
    const shape = shapes.find((sh) => sameShape(sh, t.shape)) ?? shapes[0]!;
    into.push(towerTensor(this.index, this.prefix + name, role, shape));
  }
}

function sameShape(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function finish(
  source: SourceKind,
  d: Dims,
  ropeTheta: number,
  standardize: boolean,
  patchKernelChw: boolean,
  files: string[],
  stages: StageSpec[],
): TowerSpec {
  return {
    family: 'gemma4',
    source,
    dims: {
      ...d,
      rope_theta: ropeTheta,
      standardize: standardize ? 1 : 0,
      patch_kernel_chw: patchKernelChw ? 1 : 0,
    },
    lists: {},
    files,
    stages,
  };
}

// ---------------------------------------------------------------- GGUF (llama.cpp mmproj, Ollama)

/** Whether a GGUF file is Gemma 4's to read: an Ollama gemma4 file, or a llama.cpp mmproj of a Gemma 4 projector. */
export function isGemma4Gguf(h: GgufHeader): boolean {
  const { arch, projector } = ggufKind(h);
  return arch === 'gemma4' || (arch === 'clip' && (projector === 'gemma4v' || projector === 'gemma4uv'));
}

/** Which GGUF layout this is (a file isGemma4Gguf claims); what tessera cannot run is ERR_MODEL_FORMAT. */
export function gemma4GgufFlavour(h: GgufHeader): 'gguf-llama.cpp' | 'gguf-ollama' {
  const { arch, projector } = ggufKind(h);
  if (arch === 'clip') {
    if (projector === 'gemma4v') return 'gguf-llama.cpp';
    if (projector === 'gemma4uv')
      throw new TesseraError('ERR_MODEL_FORMAT', `${h.path}: projector 'gemma4uv' (the encoder-free unified Gemma 4) is not supported`);
    throw new TesseraError('ERR_MODEL_FORMAT', `${h.path}: mmproj projector type '${projector ?? '(none)'}' is not one tessera runs (gemma4v)`);
  }
  if (arch === 'gemma4') {
    if (!h.metadata.has('gemma4.vision.block_count'))
      throw new TesseraError('ERR_MODEL_FORMAT', `${h.path}: this gemma4 GGUF has no vision tower (no gemma4.vision.* metadata)`);
    return 'gguf-ollama';
  }
  throw new TesseraError('ERR_MODEL_FORMAT', `${h.path}: GGUF architecture '${arch ?? '(none)'}' is not a Gemma 4 vision file`);
}

/** A GGUF file → TowerSpec. GGUF files carry no processor settings: the processor's defaults apply. */
export function buildGemma4FromGguf(h: GgufHeader): TowerSpec {
  const source = gemma4GgufFlavour(h);
  const pre = source === 'gguf-llama.cpp' ? 'clip.vision.' : 'gemma4.vision.';
  const where = h.path;
  const key = (k: string, fallback?: number): number => {
    const v = ggufNumber(h, pre + k) ?? fallback;
    if (v === undefined) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata '${pre + k}' is missing`);
    return v;
  };
  const posIntKey = (k: string, fallback?: number, max = 1 << 20): number => {
    const v = key(k, fallback);
    if (!Number.isInteger(v) || v < 1 || v > max)
      throw new TesseraError('ERR_CONFIG_INVALID', `${where}: metadata '${pre + k}' = ${v} is out of range`);
    return v;
  };

  const tensor = (name: string) => h.tensors.get(name);
  // Only the tower's tensors are checked for a supported type (towerTensor): an Ollama file's text
  // model may well be quantised, and is never loaded.
  const pk = new Picker(ggufTensorIndex(h));

  const D = posIntKey('embedding_length');
  const heads = posIntKey('attention.head_count', undefined, 4096);
  const qNorm = tensor('v.blk.0.attn_q_norm.weight');
  if (D % heads !== 0) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: embedding_length ${D} is not a multiple of head_count ${heads}`);
  const headDim = D / heads; // docs/models/gemma4-vision.md#llamacpp-mmproj: GGUF files carry no head_dim; the q-norm weight must agree
  if (qNorm && qNorm.ne[0] !== headDim)
    throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: 'v.blk.0.attn_q_norm.weight' has ${qNorm.ne[0]} elements, expected head_dim ${headDim} (= ${D} / ${heads})`);
  const headDimWhy = headDimProblem(headDim);
  if (headDimWhy) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: ${headDimWhy}`);
  const projName = `${PROJECTION.gguf}.weight`;
  const projT = tensor(projName);
  if (!projT) throw new TesseraError('ERR_TENSOR_MISSING', `${where}: tower tensor '${projName}' is missing`);
  const posT = tensor(POSITIONS.gguf);
  if (!posT) throw new TesseraError('ERR_TENSOR_MISSING', `${where}: tower tensor '${POSITIONS.gguf}' is missing`);
  const outHidden = projT.ne[1] ?? 0;
  // The output width is the projection's; the metadata that states it must agree (Ollama: the text
  // model's width, llama.cpp: clip.vision.projection_dim).
  const widthKey = source === 'gguf-ollama' ? 'gemma4.embedding_length' : 'clip.vision.projection_dim';
  const statedWidth = ggufNumber(h, widthKey);
  if (statedWidth !== undefined && statedWidth !== outHidden)
    throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: '${projName}' projects to ${outHidden}, but ${widthKey} is ${statedWidth}`);
  const epsRaw = ggufNumber(h, pre + 'attention.layer_norm_epsilon') ?? 1e-6;
  if (!(epsRaw > 0 && epsRaw < 1e-2)) throw new TesseraError('ERR_CONFIG_INVALID', `${where}: layer_norm_epsilon ${epsRaw} is out of range`);

  const d: Dims = {
    hidden: D,
    heads,
    head_dim: headDim,
    intermediate: posIntKey('feed_forward_length'),
    out_hidden: outHidden,
    depth: posIntKey('block_count', undefined, 1024),
    // The GGUF stores f32(1e-6); HF's 1e-6 is the same float once native code narrows it.
    eps: epsRaw,
    patch_size: posIntKey('patch_size', PROCESSOR_DEFAULTS.patchSize, 64),
    pooling_kernel: posIntKey('projector.scale_factor', PROCESSOR_DEFAULTS.poolingKernelSize, 8),
    pos_rows: posT.ne[1] ?? 0,
    max_soft_tokens: PROCESSOR_DEFAULTS.maxSoftTokens,
  };
  const P = d.patch_size;
  if (source === 'gguf-llama.cpp') {
    // llama.cpp feeds (u8/255 - mean)/std to a graph that then maps to [-1, 1]; tessera takes HF's
    // pixel values (no mean/std), which equals llama.cpp only for the Gemma 4 values 0 and 1.
    for (const [k, want] of [['image_mean', 0], ['image_std', 1]] as const) {
      const a = ggufNumberArray(h, pre + k);
      if (a && a.some((x) => x !== want))
        throw new TesseraError('ERR_MODEL_FORMAT', `${where}: ${pre + k} is [${a.join(', ')}]; a Gemma 4 mmproj has ${want === 0 ? '[0, 0, 0]' : '[1, 1, 1]'}`);
    }
  }

  // Packed clamps (Ollama's v.clamp_data): (7·L + 1)·4 f32, [in_min, in_max, out_min, out_max] per
  // linear, block-major, the projector's entry last. Each entry becomes a `<lin>.clamp` role.
  const packed = tensor('v.clamp_data');
  let packedClamp: ((entry: number, role: string) => TensorSpec) | null = null;
  if (packed) {
    const want = (7 * d.depth + 1) * 4;
    if (packed.typeName !== 'F32') throw new TesseraError('ERR_MODEL_FORMAT', `${where}: tensor 'v.clamp_data' has type ${packed.typeName}, expected F32`);
    const n = packed.ne.reduce((a, b) => a * b, 1);
    if (n !== want) throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor 'v.clamp_data' has ${n} floats, expected ${want} ((7 x ${d.depth} + 1) x 4)`);
    packedClamp = (entry, role) => ({
      role, name: `v.clamp_data[${entry}]`, dtype: 'f32', shape: [4], file: 0, offset: packed.offset + entry * 16, length: 16,
    });
  }
  // The sanitize step: each GGUF name becomes the HF role its tensor has in a checkpoint.
  const clamps = (into: TensorSpec[], lin: string, stem: string, entry: number) => {
    for (const b of CLAMP_BOUNDS) pk.maybe(into, `${lin}.${b}`, `${stem}.${b}`, [[1], []]);
    if (packedClamp) into.push(packedClamp(entry, `${lin}.clamp`));
  };

  const stages: StageSpec[] = [];
  stages.push({
    name: 'embed', kind: 'embed', index: 0,
    tensors: [
      // ggml ne [P, P, 3, D]: the conv kernel, columns (c, py, px): patch_kernel_chw = 1.
      pk.need(PATCH.hf, PATCH.gguf, [D, 3, P, P]),
      // ggml ne [D, rows, 2] is numpy [2, rows, D]: HF's table as is, x rows first.
      pk.need(POSITIONS.hf, POSITIONS.gguf, [2, d.pos_rows, D]),
    ],
  });
  const shapes = linearShapes(d);
  for (let i = 0; i < d.depth; i++) {
    const pre = `v.blk.${i}.`;
    const tensors: TensorSpec[] = NORMS.map((n) => pk.need(n.hf, pre + n.gguf, [D]));
    LINEARS.forEach((l, j) => {
      tensors.push(pk.need(linearWeight(l.hf), `${pre}${l.gguf}.weight`, shapes[l.hf]));
      clamps(tensors, l.hf, pre + l.gguf, 7 * i + j);
    });
    tensors.push(pk.need(Q_NORM.hf, pre + Q_NORM.gguf, [headDim]));
    tensors.push(pk.need(K_NORM.hf, pre + K_NORM.gguf, [headDim]));
    pk.maybe(tensors, OUT_SCALE, `${pre}out_scale.weight`, [[1]]);
    stages.push({ name: `block.${i}`, kind: 'block', index: i, tensors });
  }
  const hasStd = tensor(STD_BIAS.gguf) !== undefined || tensor(STD_SCALE.gguf) !== undefined;
  stages.push({
    name: 'pooled', kind: 'pooler', index: 0,
    tensors: hasStd ? [pk.need(STD_BIAS.hf, STD_BIAS.gguf, [D]), pk.need(STD_SCALE.hf, STD_SCALE.gguf, [D])] : [],
  });
  const proj: TensorSpec[] = [pk.need(`${PROJECTION.lin}.weight`, `${PROJECTION.gguf}.weight`, [outHidden, D])];
  clamps(proj, PROJECTION.lin, PROJECTION.gguf, 7 * d.depth);
  stages.push({ name: 'projected', kind: 'projector', index: 0, tensors: proj });
  return finish(source, d, ROPE_THETA, hasStd, true, [h.path], stages);
}
