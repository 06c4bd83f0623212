// Sizing and configs: the tables of sizes (docs/models/qwen-vision.md#sizing,
// docs/models/gemma4-vision.md#sizing), the float-order traps they name, and the preprocessor_config.json schemas.
import { describe, expect, it } from 'vitest';
import {
  gemmaTargetSize,
  parseGemmaPreprocessConfig,
  parseQwenPreprocessConfig,
  planGemma,
  planQwen,
  roundHalfEven,
  smartResize,
} from '../src/image/index.js';

describe('Qwen smart_resize (docs/models/qwen-vision.md#sizing, real limits: factor 32, min 65536, max 16777216)', () => {
  // [H, W, H', W', grid h, grid w, patches, merged tokens]
  const table: [number, number, number, number, number, number, number, number][] = [
    [448, 640, 448, 640, 28, 40, 1120, 280],
    [640, 448, 640, 448, 40, 28, 1120, 280],
    [1024, 1024, 1024, 1024, 64, 64, 4096, 1024],
    [28, 28, 256, 256, 16, 16, 256, 64],
    [239, 239, 288, 288, 18, 18, 324, 81],
    [200, 300, 224, 320, 14, 20, 280, 70],
    [336, 336, 320, 320, 20, 20, 400, 100],
    [720, 1280, 704, 1280, 44, 80, 3520, 880],
    [1080, 1920, 1088, 1920, 68, 120, 8160, 2040],
    [3024, 4032, 3008, 4032, 188, 252, 47376, 11844],
    [4097, 4097, 4096, 4096, 256, 256, 65536, 16384],
    [5000, 5000, 4096, 4096, 256, 256, 65536, 16384],
    [10, 2000, 32, 3648, 2, 228, 456, 114],
    [100, 20000, 96, 20000, 6, 1250, 7500, 1875],
  ];
  const cfg = parseQwenPreprocessConfig({
    size: { shortest_edge: 65536, longest_edge: 16777216 },
    patch_size: 16,
    temporal_patch_size: 2,
    merge_size: 2,
    image_mean: [0.5, 0.5, 0.5],
    image_std: [0.5, 0.5, 0.5],
  });
  for (const [H, W, h, w, gh, gw, n, tok] of table) {
    it(`${H}x${W} -> ${h}x${w}`, () => {
      expect(smartResize(H, W)).toEqual({ height: h, width: w });
      const p = planQwen({ width: W, height: H }, cfg);
      expect(p.grid).toEqual({ t: 1, h: gh, w: gw });
      expect(p.patches).toBe(n);
      expect(p.patches).toBe(tok * 4); // merge 2 x 2: the tower's own count (tower.estimate) is tested in api-tower
    });
  }
  it('1x500 is refused with ERR_IMAGE_ASPECT (ratio 500 > 200); exactly 200 passes', () => {
    expect(() => smartResize(1, 500)).toThrow(expect.objectContaining({ code: 'ERR_IMAGE_ASPECT' }));
    expect(() => smartResize(100, 20000)).not.toThrow();
    expect(() => smartResize(100, 20001)).toThrow(expect.objectContaining({ code: 'ERR_IMAGE_ASPECT' }));
  });
  it('rounds half to even like Python (94.5 -> 94, 22.5 -> 22, 10.5 -> 10, 11.5 -> 12)', () => {
    expect([94.5, 22.5, 10.5, 11.5, 0.5, 1.5, 2.4999, 2.5001].map(roundHalfEven)).toEqual([94, 22, 10, 12, 0, 2, 2, 3]);
  });
  it('per-call minPixels / maxPixels override the config', () => {
    // Overriding only maxPixels below the config's min: the max bound wins (tested first, as HF).
    expect(planQwen({ width: 600, height: 400 }, cfg, { maxPixels: 32768 }).resized).toEqual({ width: 192, height: 128 });
    expect(planQwen({ width: 30, height: 20 }, cfg, { minPixels: 16384 }).resized).toEqual({ width: 160, height: 128 });
    expect(() => planQwen({ width: 600, height: 400 }, cfg, { maxPixels: 1.5 })).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
  });
});

describe('Gemma 4 target size (docs/models/gemma4-vision.md#sizing table: input W x H -> th x tw)', () => {
  const budgets = [70, 140, 280, 560, 1120];
  // W, H, then th x tw (and soft tokens) per budget.
  const table: [number, number, [number, number, number][]][] = [
    [448, 640, [[480, 336, 70], [672, 432, 126], [960, 672, 280], [1344, 912, 532], [1920, 1344, 1120]]],
    [1024, 1024, [[384, 384, 64], [528, 528, 121], [768, 768, 256], [1104, 1104, 529], [1584, 1584, 1089]]],
    [4000, 3000, [[336, 432, 63], [480, 624, 130], [672, 912, 266], [960, 1296, 540], [1344, 1824, 1064]]],
    [30, 2000, [[3264, 48, 68], [4608, 48, 96], [6528, 96, 272], [9264, 96, 386], [13104, 192, 1092]]],
    [10, 4000, [[3360, 48, 70], [6720, 48, 140], [13440, 48, 280], [22704, 48, 473], [32112, 48, 669]]],
  ];
  const cfg = parseGemmaPreprocessConfig({});
  for (const [W, H, rows] of table) {
    rows.forEach(([th, tw, tokens], i) => {
      const S = budgets[i]!;
      it(`${W}x${H} at ${S} -> ${th}x${tw}, ${tokens} tokens`, () => {
        expect(gemmaTargetSize(H, W, S)).toEqual({ height: th, width: tw });
        const p = planGemma({ width: W, height: H }, cfg, { maxSoftTokens: S });
        expect(p.patches).toBe(tokens * 9); // pooling 3 x 3
        expect(p.patchGrid).toEqual({ h: th / 16, w: tw / 16 });
      });
    });
  }
  it('evaluates in doubles in HF order (spec: 28x1000 at 70 -> tw 2400; 1029x480 at 1120 -> th 2352)', () => {
    expect(gemmaTargetSize(28, 1000, 70).width).toBe(2400);
    expect(gemmaTargetSize(1029, 480, 1120).height).toBe(2352);
  });
  it('upscales small images to fill the budget (30x20 -> 288x480 at 70)', () => {
    expect(gemmaTargetSize(20, 30, 70)).toEqual({ height: 288, width: 480 });
  });
  it('refuses budgets other than 70/140/280/560/1120', () => {
    expect(() => planGemma({ width: 100, height: 100 }, cfg, { maxSoftTokens: 100 })).toThrow(
      expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }),
    );
    expect(() => parseGemmaPreprocessConfig({ max_soft_tokens: 256 })).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID' }));
  });
});

describe('preprocessor_config.json schemas', () => {
  it('Qwen: absent keys take the Qwen2-VL class defaults', () => {
    expect(parseQwenPreprocessConfig({})).toEqual({
      patchSize: 14,
      temporalPatchSize: 2,
      mergeSize: 2,
      minPixels: 3136,
      maxPixels: 1003520,
      imageMean: [0.48145466, 0.4578275, 0.40821073],
      imageStd: [0.26862954, 0.26130258, 0.27577711],
      doResize: true,
      resample: 3,
      doRescale: true,
      rescaleFactor: 0.00392156862745098,
      doNormalize: true,
      doConvertRgb: true,
    });
  });
  it('Qwen: size edges are pixel areas; legacy min_pixels / max_pixels overwrite them', () => {
    const c = parseQwenPreprocessConfig({ size: { shortest_edge: 65536, longest_edge: 16777216 }, patch_size: 16 });
    expect([c.minPixels, c.maxPixels, c.patchSize]).toEqual([65536, 16777216, 16]);
    const l = parseQwenPreprocessConfig({ size: { shortest_edge: 65536, longest_edge: 16777216 }, min_pixels: 1000, max_pixels: 2000 });
    expect([l.minPixels, l.maxPixels]).toEqual([1000, 2000]);
  });
  it('Qwen: bad fields are ERR_CONFIG_INVALID naming the field', () => {
    expect(() => parseQwenPreprocessConfig({ patch_size: 0 })).toThrow(/patch_size/);
    expect(() => parseQwenPreprocessConfig({ image_std: [0.5, 0, 0.5] })).toThrow(/image_std/);
    expect(() => parseQwenPreprocessConfig({ resample: 2 })).toThrow(expect.objectContaining({ code: 'ERR_CONFIG_INVALID' }));
    expect(() => parseQwenPreprocessConfig({ image_mean: [0.5] })).toThrow(/image_mean/);
  });
  it('Gemma: class defaults, and the hub processor_config.json layout (image_processor section)', () => {
    const d = parseGemmaPreprocessConfig({});
    expect(d).toMatchObject({ patchSize: 16, maxSoftTokens: 280, poolingKernelSize: 3, doRescale: true, doNormalize: false });
    expect(parseGemmaPreprocessConfig({ image_processor: { max_soft_tokens: 560 }, image_seq_length: 280 }).maxSoftTokens).toBe(560);
  });
});
