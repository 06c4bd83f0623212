#!/usr/bin/env node
// Writes a synthetic real-size Qwen3.5 vision tower (27 blocks, hidden 1152, 16 heads, MLP 4304,
// out 3584; random bf16 weights) as an HF checkpoint folder, for benchmarks. Never committed:
//   node scripts/make-synthetic-qwen.mjs [outdir]     (default bench/out/qwen3_5-synthetic)
import { mkdirSync, openSync, writeSync, closeSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = process.argv[2] ?? join(root, 'bench', 'out', 'qwen3_5-synthetic');
const V = { depth: 27, hidden_size: 1152, num_heads: 16, intermediate_size: 4304, out_hidden_size: 3584 };

export function qwenTensors({ depth, hidden_size: D, intermediate_size: I, out_hidden_size: O }) {
  const W = 4 * D;
  const t = [
    ['patch_embed.proj.weight', [D, 3, 2, 16, 16], 'w'],
    ['patch_embed.proj.bias', [D], 'b'],
    ['pos_embed.weight', [2304, D], 'e'],
  ];
  for (let l = 0; l < depth; l++) {
    const p = `blocks.${l}.`;
    t.push(
      [p + 'norm1.weight', [D], 'one'], [p + 'norm1.bias', [D], 'b'],
      [p + 'attn.qkv.weight', [3 * D, D], 'w'], [p + 'attn.qkv.bias', [3 * D], 'b'],
      [p + 'attn.proj.weight', [D, D], 'w'], [p + 'attn.proj.bias', [D], 'b'],
      [p + 'norm2.weight', [D], 'one'], [p + 'norm2.bias', [D], 'b'],
      [p + 'mlp.linear_fc1.weight', [I, D], 'w'], [p + 'mlp.linear_fc1.bias', [I], 'b'],
      [p + 'mlp.linear_fc2.weight', [D, I], 'w'], [p + 'mlp.linear_fc2.bias', [D], 'b'],
    );
  }
  t.push(
    ['merger.norm.weight', [D], 'one'], ['merger.norm.bias', [D], 'b'],
    ['merger.linear_fc1.weight', [W, W], 'w'], ['merger.linear_fc1.bias', [W], 'b'],
    ['merger.linear_fc2.weight', [O, W], 'w'], ['merger.linear_fc2.bias', [O], 'b'],
  );
  return t.map(([name, shape, kind]) => ({ name: 'model.visual.' + name, shape, kind }));
}

// xorshift32: fast, deterministic. Weights ~ U(-a, a) with a = sqrt(3 / fan_in) (unit-variance outputs).
function fill(buf, kind, fanIn, seed) {
  let s = seed >>> 0 || 1;
  const scale = kind === 'w' ? Math.sqrt(3 / fanIn) : kind === 'e' ? 0.5 : 0.02;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < buf.length / 2; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    f32[0] = kind === 'one' ? 1 : ((s / 4294967296) * 2 - 1) * scale;
    buf.writeUInt16LE(u32[0] >>> 16, i * 2);
  }
}

export function writeSafetensorsBf16(path, tensors, seed = 1) {
  const header = {};
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * 2;
    header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const fd = openSync(path, 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(text.length));
  writeSync(fd, len);
  writeSync(fd, Buffer.from(text));
  tensors.forEach((t, i) => {
    const n = t.shape.reduce((a, b) => a * b, 1);
    const buf = Buffer.alloc(n * 2);
    fill(buf, t.kind, t.shape.length > 1 ? t.shape.slice(1).reduce((a, b) => a * b, 1) : 1, seed * 7919 + i);
    writeSync(fd, buf);
  });
  closeSync(fd);
}

/** `overrides` changes the tower's size (e.g. { depth: 4 } for a block-stack bench); same seeds otherwise. */
export function makeSyntheticQwen(dir = out, overrides = {}) {
  const v = { ...V, ...overrides };
  if (existsSync(join(dir, 'model.safetensors'))) return dir;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({
    model_type: 'qwen3_5',
    vision_config: { model_type: 'qwen3_5', ...v, hidden_act: 'gelu_pytorch_tanh', in_channels: 3, patch_size: 16,
      temporal_patch_size: 2, spatial_merge_size: 2, num_position_embeddings: 2304, deepstack_visual_indexes: [] },
    text_config: { hidden_size: v.out_hidden_size },
  }, null, 2));
  writeFileSync(join(dir, 'preprocessor_config.json'), JSON.stringify({
    size: { longest_edge: 16777216, shortest_edge: 65536 }, patch_size: 16, temporal_patch_size: 2, merge_size: 2,
    image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5], processor_class: 'Qwen3VLProcessor',
    image_processor_type: 'Qwen2VLImageProcessorFast',
  }, null, 2));
  writeSafetensorsBf16(join(dir, 'model.safetensors'), qwenTensors(v));
  return dir;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(makeSyntheticQwen());
