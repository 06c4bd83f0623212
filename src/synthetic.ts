// Random-weight towers written as HF checkpoint folders: the CLI's demo tower and the benchmarks'
// real-size towers (bench/make-synthetic-*.mjs) are all made here. Weights are deterministic
// (xorshift32) and scaled so activations stay in a sane range: matrices ~ U(-a, a) with
// a = sqrt(3 / fan_in), biases ±0.02, norm weights 1, position tables ±0.5. Never real models.
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { QWEN_HUB_PREPROCESSOR_CONFIG } from './image/config.js';
import { QwenVisionConfigSchema, qwenTowerLayout } from './spec/qwen.js';

export type WeightKind = 'w' | 'b' | 'one' | 'e';

export interface SyntheticTensor {
  name: string;
  shape: number[];
  kind: WeightKind;
}

export interface QwenVisionSize {
  depth: number;
  hidden_size: number;
  num_heads: number;
  intermediate_size: number;
  out_hidden_size: number;
}

/** The Qwen3.5-size tower (Qwen3.5-9B/27B vision config, out width of the 9B's text model). */
export const QWEN3_5_LARGE: QwenVisionSize = { depth: 27, hidden_size: 1152, num_heads: 16, intermediate_size: 4304, out_hidden_size: 3584 };

/** How a tensor is filled, from its role: position table, bias, norm weight (a vector) or matrix. */
function weightKind(role: string, shape: readonly number[]): WeightKind {
  if (role === 'pos_embed.weight') return 'e';
  if (role.endsWith('.bias')) return 'b';
  return shape.length === 1 ? 'one' : 'w';
}

/** The tensors of a Qwen3.5 tower (the spec builder's own list, src/spec/qwen.ts), under `model.visual.`. */
export function qwenVisionTensors(v: QwenVisionSize): SyntheticTensor[] {
  const config = QwenVisionConfigSchema.parse({ ...v, deepstack_visual_indexes: [] });
  return qwenTowerLayout(config, []).flatMap((s) =>
    s.tensors.map(([role, shape]) => ({ name: `model.visual.${s.base}${role}`, shape, kind: weightKind(role, shape) })),
  );
}

function fill(buf: Buffer, kind: WeightKind, fanIn: number, seed: number): void {
  let s = seed >>> 0 || 1;
  const scale = kind === 'w' ? Math.sqrt(3 / fanIn) : kind === 'e' ? 0.5 : 0.02;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < buf.length / 2; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    f32[0] = kind === 'one' ? 1 : ((s / 4294967296) * 2 - 1) * scale;
    buf.writeUInt16LE(u32[0]! >>> 16, i * 2);
  }
}

/** Writes the tensors as one bf16 safetensors file, a tensor at a time (memory: the largest one). */
export function writeRandomBf16(path: string, tensors: readonly SyntheticTensor[], seed = 1): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', note: 'tessera synthetic tower: RANDOM weights' } };
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * 2;
    header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const fd = openSync(path, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(text.length));
    writeSync(fd, len);
    writeSync(fd, Buffer.from(text, 'latin1'));
    tensors.forEach((t, i) => {
      const buf = Buffer.alloc(t.shape.reduce((a, b) => a * b, 1) * 2);
      fill(buf, t.kind, t.shape.length > 1 ? t.shape.slice(1).reduce((a, b) => a * b, 1) : 1, seed * 7919 + i);
      writeSync(fd, buf);
    });
  } finally {
    closeSync(fd);
  }
}

/** A Qwen3.5 HF folder: config.json, preprocessor_config.json (the given pixel budget) and weights. */
export function writeQwenFolder(
  dir: string,
  v: QwenVisionSize,
  budget: { minPixels: number; maxPixels: number } = {
    minPixels: QWEN_HUB_PREPROCESSOR_CONFIG.size.shortest_edge,
    maxPixels: QWEN_HUB_PREPROCESSOR_CONFIG.size.longest_edge,
  },
  extraConfig: Record<string, unknown> = {},
): void {
  mkdirSync(dir, { recursive: true });
  const config = {
    model_type: 'qwen3_5',
    vision_config: {
      model_type: 'qwen3_5', ...v, hidden_act: 'gelu_pytorch_tanh', in_channels: 3, patch_size: 16,
      temporal_patch_size: 2, spatial_merge_size: 2, num_position_embeddings: 2304, deepstack_visual_indexes: [],
    },
    text_config: { hidden_size: v.out_hidden_size },
    ...extraConfig,
  };
  const preprocessor = { ...QWEN_HUB_PREPROCESSOR_CONFIG, size: { shortest_edge: budget.minPixels, longest_edge: budget.maxPixels } };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2));
  writeFileSync(join(dir, 'preprocessor_config.json'), JSON.stringify(preprocessor, null, 2));
  writeRandomBf16(join(dir, 'model.safetensors'), qwenVisionTensors(v));
}
