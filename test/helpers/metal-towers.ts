// One fixture case through a Metal backend (metal, metal-emulated), every stage against its HF reference:
// test/metal-ops.test.ts and test/metal-fastmath.test.ts.
import { join } from 'node:path';
import { expect } from 'vitest';
import { VisionTower } from '../../src/index.js';
import type { Precision } from '../../src/options.js';
import { FIXTURES, readTensors, relErr } from './fixtures.js';

// Every stage of one fixture case through `backend`; returns the worst error per stage.
// precision 'f16' / 'bf16': the half and bfloat paths (docs/metal.md#half-precision), which info.precision must report.
export async function towerCase(family: string, caseName: string, gemma: boolean, backend: 'metal' | 'metal-emulated',
  precision: Precision = 'f32'): Promise<Record<string, number>> {
  const dir = join(FIXTURES, family);
  const ref = readTensors(join(dir, 'expected', `${caseName}.safetensors`));
  const tower = await VisionTower.open(join(dir, 'model'), { backend, precision });
  try {
    expect(tower.info.backend).toBe(backend);
    expect(tower.info.precision).toBe(precision);
    const pixelValues = ref['pixel_values']!.f32();
    const input = gemma
      ? { pixelValues, positions: Int32Array.from(ref['positions']!.i64()) }
      : (() => {
          const [t, h, w] = ref['image_grid_thw']!.i64();
          return { pixelValues, grid: { t: t!, h: h!, w: w! } };
        })();
    const r = await tower.encodePixels(input, { stages: true });
    const names = Object.keys(ref).filter((k) => !['pixel_values', 'image_grid_thw', 'positions'].includes(k));
    expect(names.length).toBeGreaterThan(3);
    const errs: Record<string, number> = {};
    for (const name of names) {
      const ours = name.startsWith('deepstack.') ? r.deepstack![Number(name.split('.')[1])] : r.stages![name];
      expect(ours, `stage ${name}`).toBeDefined();
      errs[name] = relErr(ours!, ref[name]!.f32());
    }
    return errs;
  } finally {
    await tower.close();
  }
}
