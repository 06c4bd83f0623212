// Qwen3.5 (and Qwen3.5-MoE) and Qwen3-VL: one tower (docs/models/qwen-vision.md), Qwen3-VL's with deepstack
// mergers. Images go through the Qwen processor; the engines take the merged rows (with the deepstack rows
// after them) and image_grid_thw. Opens HF folders and llama.cpp mmproj files.
import type { TowerFamily } from '../family.js';
import { QWEN3_PROJECTORS, QWEN_IMAGES, QWEN_PIXEL_INPUTS, qwenGgufProcessor } from '../qwen-common.js';
import { buildQwen3FromGguf, buildQwenSpec, isQwen3Gguf, QWEN3_IDS, QWEN3_MODEL_TYPES, type Qwen3Id } from './spec.js';

/** @internal */
export const qwen3 = {
  ids: QWEN3_IDS,
  modelTypes: QWEN3_MODEL_TYPES,
  label: 'Qwen',
  fromHfFolder: buildQwenSpec,
  gguf: { claims: isQwen3Gguf, build: buildQwen3FromGguf, projectors: QWEN3_PROJECTORS, processor: qwenGgufProcessor },
  images: QWEN_IMAGES,
  pixelInput: QWEN_PIXEL_INPUTS,
  outputs: {},
  doctorFixtures: [{ dir: 'qwen3_5-tiny', family: 'qwen3_5', caseName: 'rocket_thin' }],
} satisfies TowerFamily<Qwen3Id>;
