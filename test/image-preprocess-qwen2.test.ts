// The Qwen2-VL / Qwen2.5-VL image processor (Qwen2VLImageProcessor: patch 14, merge 2, OpenAI CLIP mean/std)
// against HF's PIL backend (transformers 5.17) on every fixture image, at the checkpoints' own budget (min 3,136,
// max 12,845,056 pixels) and at two small ones: the grid, and the SHA-256 of the uint8 patch rows (rescale and
// normalise off) and of the f32 pixel_values, bit for bit. The checkpoints' preprocessor_config.json states the
// budget twice (min_pixels / max_pixels of older files, size.shortest_edge / longest_edge of newer ones); each
// spelling alone gives the same rows.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseQwenPreprocessConfig, preprocessQwen, preprocessQwenBytes } from '../src/image/index.js';
import { FIXTURES, IMAGES, readJson } from './helpers/images.js';

interface Case {
  image: string;
  budget: string;
  options: { min_pixels?: number; max_pixels?: number };
  grid_thw: [number, number, number];
  sha256_u8: string;
  sha256_f32: string;
}
const fx = readJson<{ config: Record<string, unknown>; cases: Case[] }>(FIXTURES + 'preprocess/qwen2.json');
const sha256 = (a: Uint8Array | Float32Array) => createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex');

// The same settings in each spelling of the pixel budget.
const { min_pixels, max_pixels, size, ...rest } = fx.config as { min_pixels: number; max_pixels: number; size: object } & Record<string, unknown>;
const SPELLINGS = {
  'both keys (as shipped)': fx.config,
  'min_pixels / max_pixels only': { ...rest, min_pixels, max_pixels },
  'size.shortest_edge / longest_edge only': { ...rest, size },
};

describe('Qwen2-VL preprocessing equals HF (PIL backend)', () => {
  it('the fixture covers every image at three budgets, and the config is the Qwen2-VL processor', () => {
    expect(fx.cases.length).toBeGreaterThanOrEqual(30);
    expect(new Set(fx.cases.map((c) => c.budget))).toEqual(new Set(['real', 'max40k', 'min200k']));
    const cfg = parseQwenPreprocessConfig(fx.config);
    expect([cfg.patchSize, cfg.mergeSize, cfg.temporalPatchSize, cfg.minPixels, cfg.maxPixels]).toEqual([14, 2, 2, 3136, 12845056]);
  });

  for (const [spelling, config] of Object.entries(SPELLINGS)) {
    const cfg = parseQwenPreprocessConfig(config);
    it(`${spelling}: the budget reads the same`, () => {
      expect([cfg.minPixels, cfg.maxPixels]).toEqual([min_pixels, max_pixels]);
    });
  }

  const cfg = parseQwenPreprocessConfig(SPELLINGS['size.shortest_edge / longest_edge only']);
  const legacy = parseQwenPreprocessConfig(SPELLINGS['min_pixels / max_pixels only']);
  for (const c of fx.cases) {
    it(`${c.image} at budget ${c.budget}: grid, uint8 rows and f32 pixel_values bit-exact`, async () => {
      const opts = { minPixels: c.options.min_pixels, maxPixels: c.options.max_pixels };
      const bytes = await preprocessQwenBytes(IMAGES + c.image, cfg, opts);
      expect([bytes.grid.t, bytes.grid.h, bytes.grid.w]).toEqual(c.grid_thw);
      expect(bytes.width).toBe(3 * 2 * 14 * 14);
      expect(sha256(bytes.pixelValues)).toBe(c.sha256_u8);
      const floats = await preprocessQwen(IMAGES + c.image, legacy, opts);
      expect([floats.grid.t, floats.grid.h, floats.grid.w]).toEqual(c.grid_thw);
      expect(sha256(floats.pixelValues)).toBe(c.sha256_f32);
    });
  }
});
