// Test-side access to the gemma4-tiny fixture (test/fixtures/gemma4-tiny, a copy of
// shared/fixtures/gemma4-tiny): whole-file safetensors reads (the files are small) and builders of
// Ollama-layout GGUF files from the fixture's own tensors.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { GGML, T, type KV, type TensorIn, writeGguf } from './gguf-writer.js';

export const GEMMA4_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'gemma4-tiny');
export const GEMMA4_MODEL = join(GEMMA4_DIR, 'model');
export const GEMMA4_MMPROJ = join(GEMMA4_DIR, 'mmproj-gemma4v-f16.gguf');

export interface StTensor {
  dtype: string;
  shape: number[];
  bytes: Uint8Array;
}

export function readSafetensors(path: string): Map<string, StTensor> {
  const b = readFileSync(path);
  const n = Number(b.readBigUInt64LE(0));
  const header = JSON.parse(b.toString('utf8', 8, 8 + n)) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out = new Map<string, StTensor>();
  for (const [k, v] of Object.entries(header)) {
    if (k === '__metadata__') continue;
    const [s, e] = v.data_offsets;
    out.set(k, { dtype: v.dtype, shape: v.shape, bytes: new Uint8Array(b.buffer, b.byteOffset + 8 + n + s, e - s) });
  }
  return out;
}

/** A float32 copy of an F32 tensor. */
export function f32(t: StTensor): Float32Array {
  if (t.dtype !== 'F32') throw new Error(`f32(): tensor is ${t.dtype}`);
  return new Float32Array(t.bytes.slice().buffer);
}
export interface Gemma4Case {
  name: string;
  patches: number;
  soft_tokens: number;
  patches_wh: [number, number];
}
export const GEMMA4_CASES: Gemma4Case[] = (
  JSON.parse(readFileSync(join(GEMMA4_DIR, 'cases.json'), 'utf8')) as { cases: Gemma4Case[] }
).cases;

// ---- Ollama-layout files (docs/models/gemma4-vision.md#ollama-single-file)

const LIN = [
  ['self_attn.q_proj', 'attn_q'], ['self_attn.k_proj', 'attn_k'], ['self_attn.v_proj', 'attn_v'],
  ['self_attn.o_proj', 'attn_out'], ['mlp.gate_proj', 'ffn_gate'], ['mlp.up_proj', 'ffn_up'], ['mlp.down_proj', 'ffn_down'],
] as const;
const NORM = [
  ['input_layernorm', 'ln1'], ['post_attention_layernorm', 'attn_post_norm'],
  ['pre_feedforward_layernorm', 'ln2'], ['post_feedforward_layernorm', 'ffn_post_norm'],
] as const;
const BOUNDS = ['input_min', 'input_max', 'output_min', 'output_max'] as const;

export interface OllamaOptions {
  /** Clamp encoding: per-linear scalars, packed v.clamp_data, packed but all zero, or none at all. */
  clamps: 'scalars' | 'packed' | 'packed-zeros' | 'none';
  /** Add a quantised text tensor (must be ignored) and audio-ish tensors. */
  withTextModel?: boolean;
  /** Override a vision tensor's type and bytes (refusal tests). */
  patch?: (t: TensorIn) => TensorIn;
  /** Extra metadata / tensors. */
  extraKv?: KV[];
  extraTensors?: TensorIn[];
  /** Leave these metadata keys out; write this general.architecture. */
  dropKv?: string[];
  arch?: string;
}

/**
 * The fixture's HF folder (f32) rewritten as an Ollama single-file GGUF: all tensors F32, patch
 * kernel permuted to (c, py, px) as Ollama's converter does, clamps as scalars or packed.
 */
export function ollamaGgufFromFolder(opts: OllamaOptions): Buffer {
  const st = readSafetensors(join(GEMMA4_MODEL, 'model.safetensors'));
  const cfg = JSON.parse(readFileSync(join(GEMMA4_MODEL, 'config.json'), 'utf8'));
  const v = cfg.vision_config;
  const L: number = v.num_hidden_layers, D: number = v.hidden_size, P: number = v.patch_size;
  const get = (n: string) => {
    const t = st.get(`model.${n}`);
    if (!t) throw new Error(`fixture lacks ${n}`);
    return t;
  };
  const tensors: TensorIn[] = [];
  const add = (name: string, shape: number[], bytes: Uint8Array) =>
    tensors.push({ name, ne: [...shape].reverse(), type: GGML.F32, data: bytes });

  // HF input_proj [D, (py·P+px)·3+c] → conv kernel [D, 3, P, P].
  const w = f32(get('vision_tower.patch_embedder.input_proj.weight'));
  const k = new Float32Array(w.length);
  for (let d = 0; d < D; d++)
    for (let py = 0; py < P; py++)
      for (let px = 0; px < P; px++)
        for (let c = 0; c < 3; c++) k[d * 3 * P * P + c * P * P + py * P + px] = w[d * 3 * P * P + (py * P + px) * 3 + c]!;
  add('v.patch_embd.weight', [D, 3, P, P], new Uint8Array(k.buffer));
  const pos = get('vision_tower.patch_embedder.position_embedding_table');
  add('v.position_embd.weight', pos.shape, pos.bytes);
  const packed: number[] = [];
  for (let i = 0; i < L; i++) {
    const hf = `vision_tower.encoder.layers.${i}.`;
    for (const [h, g] of LIN) {
      const t = get(`${hf}${h}.linear.weight`);
      add(`v.blk.${i}.${g}.weight`, t.shape, t.bytes);
      const b = BOUNDS.map((x) => f32(get(`${hf}${h}.${x}`))[0]!);
      if (opts.clamps === 'scalars') BOUNDS.forEach((x, j) => add(`v.blk.${i}.${g}.${x}`, [1], new Uint8Array(Float32Array.of(b[j]!).buffer)));
      else packed.push(...(opts.clamps === 'packed-zeros' ? [0, 0, 0, 0] : b));
    }
    for (const [h, g] of NORM) {
      const t = get(`${hf}${h}.weight`);
      add(`v.blk.${i}.${g}.weight`, t.shape, t.bytes);
    }
    for (const q of ['q', 'k']) {
      const t = get(`${hf}self_attn.${q}_norm.weight`);
      add(`v.blk.${i}.attn_${q}_norm.weight`, t.shape, t.bytes);
    }
  }
  for (const s of ['bias', 'scale']) {
    const t = get(`vision_tower.std_${s}`);
    add(`v.std_${s}`, t.shape, t.bytes);
  }
  const proj = get('embed_vision.embedding_projection.weight');
  add('mm.input_projection.weight', proj.shape, proj.bytes);
  if (opts.clamps === 'packed' || opts.clamps === 'packed-zeros') {
    packed.push(0, 0, 0, 0); // the projector's entry: HF has none, the converter zero-fills it
    add('v.clamp_data', [packed.length], new Uint8Array(Float32Array.from(packed).buffer));
  }
  if (opts.withTextModel) {
    // A Q8_0 text embedding (34-byte blocks of 32) and an audio tensor: present, never loaded.
    tensors.push({ name: 'token_embd.weight', ne: [64, 4], type: GGML.Q8_0, data: new Uint8Array(34 * 2 * 4) });
    tensors.push({ name: 'a.blk.0.attn_q.weight', ne: [8, 8], type: GGML.F16, data: new Uint8Array(128) });
  }
  for (const t of opts.extraTensors ?? []) tensors.push(t);
  const T_ = cfg.text_config.hidden_size as number;
  const kv: KV[] = [
    { key: 'general.architecture', type: T.STRING, value: opts.arch ?? 'gemma4' },
    { key: 'general.alignment', type: T.U32, value: 32 },
    { key: 'gemma4.embedding_length', type: T.U32, value: T_ },
    { key: 'gemma4.block_count', type: T.U32, value: 1 },
    { key: 'gemma4.vision.block_count', type: T.U32, value: L },
    { key: 'gemma4.vision.embedding_length', type: T.U32, value: D },
    { key: 'gemma4.vision.attention.head_count', type: T.U32, value: v.num_attention_heads },
    { key: 'gemma4.vision.feed_forward_length', type: T.U32, value: v.intermediate_size },
    { key: 'gemma4.vision.patch_size', type: T.U32, value: P },
    { key: 'gemma4.vision.num_channels', type: T.U32, value: 3 },
    { key: 'gemma4.vision.projector.scale_factor', type: T.U32, value: v.pooling_kernel_size },
    { key: 'gemma4.vision.attention.layer_norm_epsilon', type: T.F32, value: 1e-6 },
    { key: 'tokenizer.ggml.tokens', type: T.ARRAY, elementType: T.STRING, value: ['<pad>', '<eos>', '<bos>'] },
    ...(opts.extraKv ?? []),
  ];
  const kept = kv.filter((k) => !(opts.dropKv ?? []).includes(k.key));
  return writeGguf({ kv: kept, tensors: opts.patch ? tensors.map(opts.patch) : tensors });
}
