// The Qwen3.5 and Qwen3-VL towers against HF transformers (fp32 on the CPU): every stage of every
// fixture case from HF's own pixel_values, within 1e-4 (max abs error over max abs reference).
import { describe, expect, it, beforeAll, afterAll } from 'vitest';
import { join } from 'node:path';
import { VisionTower } from '../src/index.js';
import { FIXTURES, readJson, readTensors, relErr } from './helpers/fixtures.js';

const TOL = 1e-4;

for (const family of ['qwen3_5-tiny', 'qwen3_vl-tiny']) {
  describe(`${family} on the CPU`, () => {
    const dir = join(FIXTURES, family);
    const cases = readJson<{ cases: { name: string; grid_thw: number[] }[] }>(join(dir, 'cases.json')).cases;
    let tower: VisionTower;
    beforeAll(async () => {
      tower = await VisionTower.open(join(dir, 'model'), { backend: 'cpu' });
    });
    afterAll(() => tower?.close());

    for (const c of cases) {
      it(`${c.name}: every stage within ${TOL} of HF`, async () => {
        const ref = readTensors(join(dir, 'expected', `${c.name}.safetensors`));
        const [t, h, w] = ref['image_grid_thw']!.i64();
        const r = await tower.encodePixels(
          { pixelValues: ref['pixel_values']!.f32(), grid: { t: t!, h: h!, w: w! } },
          { stages: true },
        );
        const names = Object.keys(ref).filter((k) => k !== 'pixel_values' && k !== 'image_grid_thw');
        expect(names.length).toBeGreaterThan(3);
        for (const name of names) {
          const ours = name.startsWith('deepstack.') ? r.deepstack![Number(name.split('.')[1])] : r.stages![name];
          expect(ours, `stage ${name}`).toBeDefined();
          const err = relErr(ours!, ref[name]!.f32());
          expect(err, `stage ${name}: rel err ${err}`).toBeLessThan(TOL);
        }
        expect(r.embeddings).toEqual(r.stages!['merged']);
        expect(r.tokens).toBe(c.grid_thw.reduce((a, b) => a * b, 1) / 4);
        expect(r.width).toBe(tower.info.outHidden);
      });
    }

    it('a multi-image call equals the per-image runs and HF batch.*', async () => {
      const per = cases.map((c) => readTensors(join(dir, 'expected', `${c.name}.safetensors`)));
      const pixels = per.map((p) => p['pixel_values']!.f32());
      const all = new Float32Array(pixels.reduce((a, p) => a + p.length, 0));
      let off = 0;
      for (const p of pixels) all.set(p, off), (off += p.length);
      const grid = per.map((p) => {
        const [t, h, w] = p['image_grid_thw']!.i64();
        return { t: t!, h: h!, w: w! };
      });
      const batch = await tower.encodePixels({ pixelValues: all, grid });
      const ref = readTensors(join(dir, 'expected', 'batch.safetensors'));
      expect(relErr(batch.embeddings, ref['merged']!.f32())).toBeLessThan(TOL);
      // Equal to the per-image runs: segments keep images apart, so the rows are identical.
      let row = 0;
      for (let i = 0; i < per.length; i++) {
        const single = await tower.encodePixels({ pixelValues: pixels[i]!, grid: grid[i]! });
        const slice = batch.embeddings.subarray(row * batch.width, (row + single.tokens) * batch.width);
        expect(relErr(slice, single.embeddings)).toBeLessThan(1e-6);
        row += single.tokens;
      }
      for (const [k, ds] of (batch.deepstack ?? []).entries()) {
        const name = `deepstack.${k}`;
        if (ref[name]) expect(relErr(ds, ref[name]!.f32())).toBeLessThan(TOL);
      }
    });
  });
}
