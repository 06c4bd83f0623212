// Every case of the HF fixtures (fixtures/preprocess/{qwen,gemma4}/cases.json, made with the PIL
// backend of transformers 5.17): our bytes equal pixel_values_u8, our floats equal pixel_values,
// and grid / positions / token counts equal HF's; the real-budget cases match by sha256.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  parseGemmaPreprocessConfig,
  parseQwenPreprocessConfig,
  preprocessGemma,
  preprocessGemmaBytes,
  preprocessQwen,
  preprocessQwenBytes,
} from '../src/image/index.js';
import { FIXTURES, IMAGES, asFloat32, asInt64Numbers, readJson, readSafetensors } from './helpers/images.js';

interface QwenCase {
  name: string;
  image: string;
  options: { min_pixels?: number; max_pixels?: number };
  decoded_size_wh: [number, number];
  grid_thw: [number, number, number];
  resized_hw: [number, number];
  patches: number;
  tokens: number;
  with_float: boolean;
}
interface GemmaCase {
  name: string;
  image: string;
  options: { max_soft_tokens?: number };
  decoded_size_wh: [number, number];
  patches_wh: [number, number];
  resized_hw: [number, number];
  patches: number;
  soft_tokens: number;
  with_float: boolean;
}
interface RealCase {
  name: string;
  image: string;
  grid_thw?: [number, number, number];
  patches_wh?: [number, number];
  tokens?: number;
  soft_tokens?: number;
  sha256_pixel_values_u8: string;
}
interface Cases<C> {
  config: unknown;
  cases: C[];
  real_budget_cases: RealCase[];
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Index of the first differing element, or -1: a readable failure instead of a 1 MB diff. */
function firstDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return -2;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

describe('Qwen preprocessing equals HF (PIL backend)', () => {
  const dir = FIXTURES + 'preprocess/qwen/';
  const fx = readJson<Cases<QwenCase>>(dir + 'cases.json');
  const cfg = parseQwenPreprocessConfig(fx.config);

  for (const c of fx.cases) {
    it(c.name, async () => {
      const opts = { minPixels: c.options.min_pixels, maxPixels: c.options.max_pixels };
      const ref = readSafetensors(dir + c.name + '.safetensors');
      const bytes = await preprocessQwenBytes(IMAGES + c.image, cfg, opts);
      expect([bytes.decoded.width, bytes.decoded.height]).toEqual(c.decoded_size_wh);
      expect([bytes.resized.height, bytes.resized.width]).toEqual(c.resized_hw);
      expect([bytes.grid.t, bytes.grid.h, bytes.grid.w]).toEqual(c.grid_thw);
      expect(asInt64Numbers(ref.image_grid_thw!)).toEqual(c.grid_thw);
      expect(bytes.patches).toBe(c.patches);
      expect(bytes.patches).toBe(c.tokens * 4); // merge 2 x 2
      expect(bytes.width).toBe(1536);
      expect(ref.pixel_values_u8!.shape).toEqual([c.patches, bytes.width]);
      expect(firstDiff(bytes.pixelValues, ref.pixel_values_u8!.bytes)).toBe(-1);

      const floats = await preprocessQwen(IMAGES + c.image, cfg, opts);
      expect(floats.pixelValues.length).toBe(c.patches * floats.width);
      if (c.with_float) {
        expect(firstDiff(floats.pixelValues, asFloat32(ref.pixel_values!))).toBe(-1);
      } else {
        // No stored floats: they must follow from the bytes by HF's formula (the float cases
        // above pin that formula bit for bit).
        const f = floats.pixelValues;
        for (let i = 0; i < f.length; i += 97) {
          const u = bytes.pixelValues[i]!;
          expect(f[i]).toBe(Math.fround(Math.fround(Math.fround(u * cfg.rescaleFactor) - 0.5) / 0.5));
        }
      }
    });
  }

  for (const c of fx.real_budget_cases) {
    it(`real budget: ${c.name}`, async () => {
      const r = await preprocessQwenBytes(IMAGES + c.image, cfg, { minPixels: 65536, maxPixels: 16777216 });
      expect([r.grid.t, r.grid.h, r.grid.w]).toEqual(c.grid_thw);
      expect(r.patches).toBe(c.tokens * 4);
      expect(sha256(r.pixelValues)).toBe(c.sha256_pixel_values_u8);
    });
  }
});

describe('Gemma 4 preprocessing equals HF (PIL backend)', () => {
  const dir = FIXTURES + 'preprocess/gemma4/';
  const fx = readJson<Cases<GemmaCase>>(dir + 'cases.json');
  const cfg = parseGemmaPreprocessConfig(fx.config);

  for (const c of fx.cases) {
    it(c.name, async () => {
      const opts = { maxSoftTokens: c.options.max_soft_tokens };
      const ref = readSafetensors(dir + c.name + '.safetensors');
      const bytes = await preprocessGemmaBytes(IMAGES + c.image, cfg, opts);
      expect([bytes.decoded.width, bytes.decoded.height]).toEqual(c.decoded_size_wh);
      expect([bytes.resized.height, bytes.resized.width]).toEqual(c.resized_hw);
      expect([bytes.patchGrid.w, bytes.patchGrid.h]).toEqual(c.patches_wh);
      expect(bytes.patches).toBe(c.patches);
      expect(bytes.patches).toBe(c.soft_tokens * 9); // pooling 3 x 3
      expect(bytes.width).toBe(768);
      expect(firstDiff(bytes.pixelValues, ref.pixel_values_u8!.bytes)).toBe(-1);
      expect(Array.from(bytes.positions)).toEqual(asInt64Numbers(ref.positions!));

      const floats = await preprocessGemma(IMAGES + c.image, cfg, opts);
      expect(Array.from(floats.positions)).toEqual(Array.from(bytes.positions));
      if (c.with_float) {
        expect(firstDiff(floats.pixelValues, asFloat32(ref.pixel_values!))).toBe(-1);
      } else {
        const f = floats.pixelValues;
        for (let i = 0; i < f.length; i += 97) expect(f[i]).toBe(Math.fround(bytes.pixelValues[i]! * cfg.rescaleFactor));
      }
    });
  }

  for (const c of fx.real_budget_cases) {
    it(`real budget: ${c.name}`, async () => {
      const r = await preprocessGemmaBytes(IMAGES + c.image, cfg, { maxSoftTokens: 280 });
      expect([r.patchGrid.w, r.patchGrid.h]).toEqual(c.patches_wh);
      expect(r.patches).toBe(c.soft_tokens * 9);
      expect(sha256(r.pixelValues)).toBe(c.sha256_pixel_values_u8);
    });
  }
});
