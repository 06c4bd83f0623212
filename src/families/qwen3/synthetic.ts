// A random-weight Qwen3.5 tower written as an HF checkpoint folder (the CLI's demo tower, the benchmarks'
// real-size tower): its tensors are the spec builder's own list, filled by src/synthetic.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { QWEN_HUB_PREPROCESSOR_CONFIG } from '../../image/config.js';
import { type SyntheticTensor, type WeightKind, writeRandomBf16 } from '../../synthetic.js';
import { QwenVisionConfigSchema, qwenTowerLayout } from './spec.js';

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

/** The tensors of a Qwen3.5 tower (the spec builder's own list, spec.ts), under `model.visual.`. */
export function qwenVisionTensors(v: QwenVisionSize): SyntheticTensor[] {
  const config = QwenVisionConfigSchema.parse({ ...v, deepstack_visual_indexes: [] });
  return qwenTowerLayout(config, []).flatMap((s) =>
    s.tensors.map(([role, shape]) => ({ name: `model.visual.${s.base}${role}`, shape, kind: weightKind(role, shape) })),
  );
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
