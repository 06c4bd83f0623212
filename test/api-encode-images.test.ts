// From image files to embeddings: tower.encode(file) and encodeBatch(files) — decode, HF-exact
// preprocessing, then the tower — against HF's expected outputs for every fixture case of all
// three tiny towers, within 1e-4. encodeBatch runs block-major and keeps going past a bad input.
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TesseraError, VisionTower, type EncodeResult } from '../src/index.js';
import { FIXTURES, readJson, readTensors, relErr } from './helpers/fixtures.js';

const TOL = 1e-4;
const IMAGES = join(FIXTURES, 'images');

interface Case {
  name: string;
  image: string;
  options: { max_pixels?: number; min_pixels?: number; max_soft_tokens?: number };
}

function encodeOptions(c: Case) {
  return {
    ...(c.options.max_pixels ? { maxPixels: c.options.max_pixels } : {}),
    ...(c.options.min_pixels ? { minPixels: c.options.min_pixels } : {}),
    ...(c.options.max_soft_tokens ? { maxSoftTokens: c.options.max_soft_tokens } : {}),
  };
}

const FINAL: Record<string, string> = { 'qwen3_5-tiny': 'merged', 'qwen3_vl-tiny': 'merged', 'gemma4-tiny': 'projected' };

for (const family of ['qwen3_5-tiny', 'qwen3_vl-tiny', 'gemma4-tiny']) {
  describe(`${family}: encode(file)`, () => {
    const dir = join(FIXTURES, family);
    const cases = readJson<{ cases: Case[] }>(join(dir, 'cases.json')).cases;
    let tower: VisionTower;
    beforeAll(async () => {
      tower = await VisionTower.open(join(dir, 'model'), { backend: 'cpu' });
    });
    afterAll(() => tower?.close());

    for (const c of cases) {
      it(`${c.name}: preprocess equals HF's pixel_values exactly, embeddings within ${TOL}`, async () => {
        const ref = readTensors(join(dir, 'expected', `${c.name}.safetensors`));
        const pre = await tower.preprocess(join(IMAGES, c.image), encodeOptions(c));
        expect(Buffer.from(pre.pixelValues.buffer).equals(Buffer.from(ref['pixel_values']!.f32().buffer))).toBe(true);
        const r = await tower.encode(join(IMAGES, c.image), encodeOptions(c));
        const err = relErr(r.embeddings, ref[FINAL[family]!]!.f32());
        expect(err, `rel err ${err}`).toBeLessThan(TOL);
        expect(r.timings.decodeMs).toBeGreaterThan(0);
        // A Buffer gives the same result as the path.
        const fromBuffer = await tower.encode(readFileSync(join(IMAGES, c.image)), encodeOptions(c));
        expect(fromBuffer.embeddings).toEqual(r.embeddings);
      });
    }

    it('encodeBatch: one block-major pass, per-image results equal encode(), a bad input in place', async () => {
      const same = cases.filter((c) => JSON.stringify(c.options) === JSON.stringify(cases[0]!.options));
      const inputs = [...same.map((c) => join(IMAGES, c.image)), Buffer.from('not an image'), join(IMAGES, same[0]!.image)];
      const blocksSeen: number[] = [];
      const results = await tower.encodeBatch(inputs, { ...encodeOptions(same[0]!), onProgress: (p) => blocksSeen.push(p.block) });
      expect(results).toHaveLength(inputs.length);
      const bad = results[same.length];
      expect(bad).toBeInstanceOf(TesseraError);
      expect((bad as TesseraError).code).toBe('ERR_IMAGE_DECODE');
      expect((bad as TesseraError).message).toContain(`input ${same.length}`);
      for (const [i, c] of same.entries()) {
        const ref = readTensors(join(dir, 'expected', `${c.name}.safetensors`));
        const r = results[i] as EncodeResult;
        expect(relErr(r.embeddings, ref[FINAL[family]!]!.f32())).toBeLessThan(TOL);
      }
      expect((results.at(-1) as EncodeResult).embeddings).toEqual((results[0] as EncodeResult).embeddings);
      // All good images fit one group under the default budget: one pass over the stages.
      expect(blocksSeen).toEqual([...blocksSeen].sort((a, b) => a - b));
    });

    it("encodeBatch with stages: each image's stages are encode()'s, with the addon's shapes and row kinds", async () => {
      const same = cases.filter((c) => JSON.stringify(c.options) === JSON.stringify(cases[0]!.options));
      const files = same.map((c) => join(IMAGES, c.image));
      const batch = (await tower.encodeBatch(files, { ...encodeOptions(same[0]!), stages: true })) as EncodeResult[];
      for (const [i, f] of files.entries()) {
        const one = await tower.encode(f, { ...encodeOptions(same[0]!), stages: true });
        const estimate = await tower.estimate(f, encodeOptions(same[0]!));
        expect(batch[i]!.tokens).toBe(estimate.tokens);
        expect(one.tokens).toBe(estimate.tokens);
        expect(Object.keys(batch[i]!.stages!)).toEqual(Object.keys(one.stages!));
        for (const [name, data] of Object.entries(one.stages!)) {
          const shape = one.stageShapes![name]!;
          expect(batch[i]!.stageShapes![name], name).toEqual(shape);
          expect(shape.kind, name).toBe(name === 'embed' || name.startsWith('block.') ? 'patch' : 'token');
          expect(shape.rows, name).toBe(shape.kind === 'patch' ? estimate.patches : estimate.tokens);
          expect(data.length, name).toBe(shape.rows * shape.cols);
          expect(Buffer.from(batch[i]!.stages![name]!.buffer).equals(Buffer.from(data.buffer)), name).toBe(true);
        }
      }
    });
  });
}

describe('encodeBatch under a memoryBudget', () => {
  it('splits the batch where activations would pass the budget; results are unchanged', async () => {
    const model = join(FIXTURES, 'qwen3_5-tiny', 'model');
    const files = ['coffee.png', 'astronaut.jpg', 'camera_gray.png'].map((f) => join(IMAGES, f));
    const free = await VisionTower.open(model, { backend: 'cpu', residency: 'resident' });
    const whole = await free.encodeBatch(files);
    const estimates = await Promise.all(files.map((f) => free.estimate(f)));
    const one = estimates.reduce((a, b) => (a.peakBytes >= b.peakBytes ? a : b));
    const firstImages = new Set<number>();
    await free.encodeBatch(files, { onProgress: (p) => firstImages.add(p.image) });
    expect([...firstImages]).toEqual([0]); // no budget: one group
    await free.close();

    // Room for the weights and the largest image's activations, never two images'.
    const tight = await VisionTower.open(model, { backend: 'cpu', residency: 'resident', memoryBudget: one.peakBytes + 1024 });
    const seen = new Set<number>();
    const split = await tight.encodeBatch(files, { onProgress: (p) => seen.add(p.image) });
    expect([...seen]).toEqual([0, 1, 2]); // three groups, one image each
    split.forEach((r, i) => expect((r as EncodeResult).embeddings).toEqual((whole[i] as EncodeResult).embeddings));
    // An image whose own peak passes the budget is refused before any work.
    const small = await VisionTower.open(model, { backend: 'cpu', residency: 'resident', memoryBudget: one.weightBytes + 4096 });
    const refused = await small.encodeBatch([files[0]!]);
    expect(estimates[0]!.peakBytes).toBeGreaterThan(one.weightBytes + 4096);
    expect((refused[0] as TesseraError).code).toBe('ERR_IMAGE_TOO_LARGE');
    await tight.close();
    await small.close();
  });
});
