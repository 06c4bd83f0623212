// A random-weight Qwen2.5-VL tower written as an HF checkpoint folder (the benchmarks' Qwen2.5-VL-7B-shaped tower):
// its tensors are the spec builder's own list, filled by src/synthetic.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type SyntheticTensor, writeRandomBf16 } from '../../synthetic.js';
import { qwen2TowerLayout, readQwen2VisionConfig } from './spec.js';

/** The fields of a Qwen2.5-VL vision_config that size the tower. */
export interface Qwen25VisionSize {
  depth: number;
  hidden_size: number;
  num_heads: number;
  intermediate_size: number;
  out_hidden_size: number;
  window_size: number;
  fullatt_block_indexes: number[];
}

/** The Qwen2.5-VL-7B tower (and the olmOCR / RolmOCR / Nanonets-OCR-s checkpoints built on it). */
export const QWEN2_5_VL_7B: Qwen25VisionSize = {
  depth: 32, hidden_size: 1280, num_heads: 16, intermediate_size: 3420, out_hidden_size: 3584, window_size: 112, fullatt_block_indexes: [7, 15, 23, 31],
};

/** The preprocessor_config.json Qwen2.5-VL checkpoints ship (both spellings of the pixel budget). */
export const QWEN2_HUB_PREPROCESSOR_CONFIG = {
  min_pixels: 3136,
  max_pixels: 12845056,
  size: { shortest_edge: 3136, longest_edge: 12845056 },
  patch_size: 14,
  temporal_patch_size: 2,
  merge_size: 2,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_std: [0.26862954, 0.26130258, 0.27577711],
  image_processor_type: 'Qwen2VLImageProcessor',
  processor_class: 'Qwen2_5_VLProcessor',
} as const;

function visionConfig(v: Qwen25VisionSize): Record<string, unknown> {
  return { model_type: 'qwen2_5_vl_vision', ...v, hidden_act: 'silu', in_channels: 3, patch_size: 14, spatial_merge_size: 2, temporal_patch_size: 2 };
}

/** The tensors of a Qwen2.5-VL tower under `model.visual.`: norm weights 1, biases small, matrices scaled by fan-in. */
export function qwen25VisionTensors(v: Qwen25VisionSize): SyntheticTensor[] {
  const { dims } = readQwen2VisionConfig('qwen2_5_vl', visionConfig(v), 'synthetic tower', 'vision_config.');
  return qwen2TowerLayout('qwen2_5_vl', dims).flatMap((s) =>
    s.tensors.map(([role, shape]) => ({
      name: `model.visual.${s.base}${role}`,
      shape,
      kind: role.endsWith('.bias') ? ('b' as const) : shape.length === 1 ? ('one' as const) : ('w' as const),
    })),
  );
}

/** A Qwen2.5-VL HF folder: config.json, preprocessor_config.json (the checkpoints' budget unless given) and weights. */
export function writeQwen25Folder(dir: string, v: Qwen25VisionSize, budget?: { minPixels: number; maxPixels: number }): void {
  mkdirSync(dir, { recursive: true });
  const config = { model_type: 'qwen2_5_vl', vision_config: visionConfig(v), text_config: { hidden_size: v.out_hidden_size } };
  const pre = budget
    ? { ...QWEN2_HUB_PREPROCESSOR_CONFIG, min_pixels: budget.minPixels, max_pixels: budget.maxPixels, size: { shortest_edge: budget.minPixels, longest_edge: budget.maxPixels } }
    : QWEN2_HUB_PREPROCESSOR_CONFIG;
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2));
  writeFileSync(join(dir, 'preprocessor_config.json'), JSON.stringify(pre, null, 2));
  writeRandomBf16(join(dir, 'model.safetensors'), qwen25VisionTensors(v));
}
