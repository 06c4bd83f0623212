#!/usr/bin/env node
// Writes a synthetic 26B/31B-style Gemma 4 vision tower (27 blocks, hidden 1152, 16 heads of 72,
// MLP 4304, position tables 2 x 10240, standardisation on, no clamps, projection to 2816; random
// bf16 weights) as an HF checkpoint folder, for benchmarks. Never committed:
//   node bench/make-synthetic-gemma4.mjs [outdir]     (default bench/out/gemma4-synthetic)
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeRandomBf16 } from '../dist/synthetic.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const defaultOut = join(root, 'bench', 'out', 'gemma4-synthetic');

/** The 26B-A4B / 31B vision config (docs/models/gemma4-vision.md#config); T = 26B-A4B's text width. */
export const GEMMA4_LARGE = {
  hidden_size: 1152, intermediate_size: 4304, num_hidden_layers: 27, num_attention_heads: 16, num_key_value_heads: 16,
  head_dim: 72, position_embedding_size: 10240, text_hidden: 2816,
};

export function gemma4Tensors(v = GEMMA4_LARGE) {
  const D = v.hidden_size, F = v.intermediate_size, Q = v.num_attention_heads * v.head_dim, hd = v.head_dim;
  const t = [
    ['vision_tower.patch_embedder.input_proj.weight', [D, 768], 'w'],
    ['vision_tower.patch_embedder.position_embedding_table', [2, v.position_embedding_size, D], 'e'],
  ];
  for (let l = 0; l < v.num_hidden_layers; l++) {
    const p = `vision_tower.encoder.layers.${l}.`;
    t.push(
      [p + 'input_layernorm.weight', [D], 'one'], [p + 'post_attention_layernorm.weight', [D], 'one'],
      [p + 'pre_feedforward_layernorm.weight', [D], 'one'], [p + 'post_feedforward_layernorm.weight', [D], 'one'],
      [p + 'self_attn.q_proj.linear.weight', [Q, D], 'w'], [p + 'self_attn.k_proj.linear.weight', [Q, D], 'w'],
      [p + 'self_attn.v_proj.linear.weight', [Q, D], 'w'], [p + 'self_attn.o_proj.linear.weight', [D, Q], 'w'],
      [p + 'self_attn.q_norm.weight', [hd], 'one'], [p + 'self_attn.k_norm.weight', [hd], 'one'],
      [p + 'mlp.gate_proj.linear.weight', [F, D], 'w'], [p + 'mlp.up_proj.linear.weight', [F, D], 'w'],
      [p + 'mlp.down_proj.linear.weight', [D, F], 'w'],
    );
  }
  t.push(
    ['vision_tower.std_bias', [D], 'b'], ['vision_tower.std_scale', [D], 'one'],
    ['embed_vision.embedding_projection.weight', [v.text_hidden, D], 'w'],
  );
  return t.map(([name, shape, kind]) => ({ name: 'model.' + name, shape, kind }));
}

export function makeSyntheticGemma4(dir = defaultOut, v = GEMMA4_LARGE) {
  if (existsSync(join(dir, 'model.safetensors'))) return dir;
  mkdirSync(dir, { recursive: true });
  const { text_hidden, ...vision } = v;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    model_type: 'gemma4',
    vision_config: {
      model_type: 'gemma4_vision', ...vision, hidden_activation: 'gelu_pytorch_tanh', rms_norm_eps: 1e-6,
      rope_parameters: { rope_theta: 100.0, rope_type: 'default' }, patch_size: 16, pooling_kernel_size: 3,
      use_clipped_linears: false, standardize: true,
    },
    text_config: { model_type: 'gemma4_text', hidden_size: text_hidden },
  }, null, 2));
  writeFileSync(join(dir, 'preprocessor_config.json'), JSON.stringify({
    patch_size: 16, max_soft_tokens: 280, pooling_kernel_size: 3, do_resize: true, resample: 3, do_rescale: true,
    rescale_factor: 1 / 255, do_normalize: false, image_mean: [0, 0, 0], image_std: [1, 1, 1], do_convert_rgb: true,
    image_processor_type: 'Gemma4ImageProcessor', processor_class: 'Gemma4Processor',
  }, null, 2));
  writeRandomBf16(join(dir, 'model.safetensors'), gemma4Tensors(v));
  return dir;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(makeSyntheticGemma4(process.argv[2]));
