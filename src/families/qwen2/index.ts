// Qwen2-VL and Qwen2.5-VL (docs/models/qwen2-vision.md): one folder for both, as their configs, checkpoint
// layouts, processor and outputs are the same and their towers differ only in the block, the merger's norm
// and Qwen2.5-VL's window attention (QWEN2_TOWERS). Images go through the Qwen processor (patch 14); the
// engines take the merged rows and image_grid_thw (no deepstack). Opens HF folders and llama.cpp mmproj files.
import type { TowerFamily } from '../family.js';
import { QWEN2_PROJECTORS, QWEN_IMAGES, QWEN_PIXEL_INPUTS, qwenGgufProcessor } from '../qwen-common.js';
import { buildQwen2FromGguf, buildQwen2Spec, isQwen2Gguf, QWEN2_IDS, QWEN2_MODEL_TYPES, type Qwen2Id } from './spec.js';

/** @internal */
export const qwen2 = {
  ids: QWEN2_IDS,
  modelTypes: QWEN2_MODEL_TYPES,
  label: 'Qwen',
  fromHfFolder: buildQwen2Spec,
  gguf: { claims: isQwen2Gguf, build: buildQwen2FromGguf, projectors: QWEN2_PROJECTORS, processor: qwenGgufProcessor },
  images: QWEN_IMAGES,
  pixelInput: QWEN_PIXEL_INPUTS,
  outputs: {},
  doctorFixtures: [],
} satisfies TowerFamily<Qwen2Id>;
