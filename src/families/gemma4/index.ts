// Gemma 4's vision tower and projector (docs/models/gemma4-vision.md), from an HF folder, a llama.cpp mmproj
// or an Ollama single file. Images are sized by a soft-token budget; encodePixels takes the unpadded patch
// rows with each row's (x, y); vLLM has no embedding input for it.
import { z } from 'zod';
import { SoftTokenBudgetSchema } from '../../image/config.js';
import { parseGemmaPreprocessConfig, planGemma, preprocessGemma } from '../../image/index.js';
import { MAX_INT32, float32Array } from '../../limits.js';
import type { GemmaPixelInput } from '../../options.js';
import type { Preprocessor } from '../../prepare.js';
import type { TowerSpec } from '../../spec/types.js';
import type { ReferenceInput, TowerFamily } from '../family.js';
import { checkGeometry } from '../geometry.js';
import { buildGemma4FromGguf, buildGemma4Spec, GEMMA4_IDS, GEMMA4_MODEL_TYPES, isGemma4Gguf } from './spec.js';

function gemmaPreprocessor(
  config: Record<string, unknown> | undefined,
  where: string,
  dims: Record<string, number>,
  tokensOf: (patches: number) => number,
): Preprocessor {
  const cfg = parseGemmaPreprocessConfig(config ?? {}, `${where} (preprocessor config)`);
  checkGeometry(where, [
    ['patch_size', cfg.patchSize, 'patch_size', dims['patch_size']],
    ['pooling_kernel_size', cfg.poolingKernelSize, 'pooling_kernel_size', dims['pooling_kernel']],
  ]);
  return {
    plan: (size, opts) => {
      const p = planGemma(size, cfg, opts);
      return { resized: p.resized, patches: p.patches, tokens: tokensOf(p.patches) };
    },
    run: async (input, opts) => {
      const r = await preprocessGemma(input, cfg, opts);
      return { pixelValues: r.pixelValues, positions: r.positions, patches: r.patches, tokens: tokensOf(r.patches), decoded: r.decoded, resized: r.resized, timings: r.timings };
    },
  };
}

/** encodePixels' input: { pixelValues, positions, imageRows? }. */
const GEMMA_PIXEL_INPUT = z
  .object({
    pixelValues: float32Array,
    positions: z.custom<Int32Array>((v) => v instanceof Int32Array, 'must be an Int32Array'),
    imageRows: z.array(z.number().int().min(1).max(MAX_INT32)).min(1).optional(),
  })
  .strict();

/** An HF reference's input: pixel_values (f32) and positions (i64 (x, y) pairs). */
function gemmaReferenceInput(tensor: (name: string) => Uint8Array): ReferenceInput {
  const pixelValues = new Float32Array(tensor('pixel_values').slice().buffer);
  const positions = Int32Array.from(new BigInt64Array(tensor('positions').slice().buffer), Number);
  const input: GemmaPixelInput = { pixelValues, positions };
  return { input, patches: positions.length / 2 };
}

/** @internal */
export const gemma4 = {
  ids: GEMMA4_IDS,
  modelTypes: GEMMA4_MODEL_TYPES,
  label: 'Gemma 4',
  fromHfFolder: buildGemma4Spec,
  gguf: { claims: isGemma4Gguf, build: buildGemma4FromGguf, projectors: ['gemma4v'] },
  images: {
    preprocessor: gemmaPreprocessor,
    // The processor's class defaults are every checkpoint's, and GGUF files carry no processor settings.
    defaultsSuffice: true,
    sizingKeys: { maxSoftTokens: SoftTokenBudgetSchema.optional() },
    describeSizing: (spec: TowerSpec) => `max ${spec.dims['max_soft_tokens']} soft tokens`,
  },
  pixelInput: { schema: GEMMA_PIXEL_INPUT, fromReference: gemmaReferenceInput },
  outputs: {
    vllmRefusal:
      "vLLM's Gemma 4 model (vllm/model_executor/models/gemma4_mm.py) takes pixel values only, no precomputed image embeddings; use --format sglang or safetensors",
  },
  doctorFixtures: [{ dir: 'gemma4-tiny', family: 'gemma4', caseName: 'rocket_thin' }],
} satisfies TowerFamily<(typeof GEMMA4_IDS)[number]>;
