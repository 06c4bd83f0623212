// The Qwen2-VL and Qwen2.5-VL towers against HF transformers (fp32 on the CPU, eager attention): every stage of
// every fixture case from HF's own pixel_values within 1e-4 on the CPU (max abs error over max abs reference)
// and 5e-3 on metal-emulated; images whose grids leave partial windows (rocket_thin: 2 x 46 patches, chelsea:
// 10 x 14) and a batch of every case in one call; the three residencies and a packed copy bit-identical; and
// end to end from the image files (decode, the Qwen2-VL processor, the tower).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';
import { inspectCommand } from '../src/cli/inspect.js';
import { VisionTower, type EncodeResult } from '../src/index.js';
import { loadModel } from '../src/load-model.js';
import { addon } from '../src/native.js';
import { packModel } from '../src/pack/index.js';
import { writeQwen25Folder } from '../src/synthetic.js';
import { FIXTURES, readJson, readTensors, relErr } from './helpers/fixtures.js';
import { IMAGES } from './helpers/images.js';

const CPU_TOL = 1e-4;
const METAL_TOL = 5e-3;
// bf16 operands keep 8 bits of mantissa: a stage of these small towers stays within a few parts in a hundred of
// HF's fp32 (the full-size check against HF's own bf16 error is docs/bf16.md's).
const BF16_TOL = 3e-2;

interface Case {
  name: string;
  image: string;
  options: { max_pixels?: number; min_pixels?: number };
  grid_thw: [number, number, number];
  patches: number;
  tokens: number;
}

function caseInput(dir: string, name: string) {
  const ref = readTensors(join(dir, 'expected', `${name}.safetensors`));
  const [t, h, w] = ref['image_grid_thw']!.i64();
  return { ref, input: { pixelValues: ref['pixel_values']!.f32(), grid: { t: t!, h: h!, w: w! } } };
}

/** Every stage the reference holds (embed, block.N, merged), each within `tol`. */
function expectStages(r: EncodeResult, ref: ReturnType<typeof readTensors>, tol: number): void {
  const names = Object.keys(ref).filter((k) => k !== 'pixel_values' && k !== 'image_grid_thw');
  expect(names).toContain('embed');
  expect(names).toContain('merged');
  for (const name of names) {
    const ours = r.stages?.[name];
    expect(ours, `stage ${name}`).toBeDefined();
    const err = relErr(ours!, ref[name]!.f32());
    expect(err, `stage ${name}: rel err ${err}`).toBeLessThan(tol);
  }
}

const same = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

for (const fixture of ['qwen2_vl-tiny', 'qwen2_5_vl-tiny']) {
  const dir = join(FIXTURES, fixture);
  const model = join(dir, 'model');
  const cases = readJson<{ family: string; cases: Case[] }>(join(dir, 'cases.json'));

  describe(`${fixture} on the CPU`, () => {
    let tower: VisionTower;
    beforeAll(async () => {
      tower = await VisionTower.open(model, { backend: 'cpu' });
    });
    afterAll(() => tower?.close());

    it('opens as its family, with the stages HF reports', () => {
      expect(tower.info.family).toBe(cases.family);
      expect(tower.spec.stages.map((s) => s.name).at(-1)).toBe('merged');
    });

    for (const c of cases.cases) {
      it(`${c.name} (grid ${c.grid_thw.join(' x ')}): every stage within ${CPU_TOL} of HF`, async () => {
        const { ref, input } = caseInput(dir, c.name);
        const r = await tower.encodePixels(input, { stages: true });
        expectStages(r, ref, CPU_TOL);
        expect(r.embeddings).toEqual(r.stages!['merged']);
        expect(r.tokens).toBe(c.tokens);
        expect(r.width).toBe(tower.info.outHidden);
        expect(r.stageShapes!['embed']).toEqual({ kind: 'patch', rows: c.patches, cols: tower.info.hidden });
        expect(r.stageShapes!['merged']).toEqual({ kind: 'token', rows: c.tokens, cols: tower.info.outHidden });
      });
    }

    it('a multi-image call equals the per-image runs and HF batch.merged', async () => {
      const per = cases.cases.map((c) => caseInput(dir, c.name).input);
      const all = new Float32Array(per.reduce((a, p) => a + p.pixelValues.length, 0));
      let off = 0;
      for (const p of per) all.set(p.pixelValues, off), (off += p.pixelValues.length);
      const batch = await tower.encodePixels({ pixelValues: all, grid: per.map((p) => p.grid) });
      const ref = readTensors(join(dir, 'expected', 'batch.safetensors'));
      expect(relErr(batch.embeddings, ref['merged']!.f32())).toBeLessThan(CPU_TOL);
      let row = 0;
      for (const p of per) {
        const single = await tower.encodePixels(p);
        const slice = batch.embeddings.subarray(row * batch.width, (row + single.tokens) * batch.width);
        expect(relErr(slice, single.embeddings)).toBeLessThan(1e-6);
        row += single.tokens;
      }
      expect(row).toBe(batch.tokens);
    });

    it('end to end from the image files: HF pixel_values bit for bit, then every stage within tolerance', async () => {
      for (const c of cases.cases) {
        const opts = { maxPixels: c.options.max_pixels, minPixels: c.options.min_pixels };
        const { ref } = caseInput(dir, c.name);
        const prepared = await tower.preprocess(IMAGES + c.image, opts);
        expect([prepared.grid!.t, prepared.grid!.h, prepared.grid!.w]).toEqual(c.grid_thw);
        expect(same(prepared.pixelValues, ref['pixel_values']!.f32())).toBe(true);
        const r = await tower.encode(IMAGES + c.image, { ...opts, stages: true });
        expect(r.grid).toEqual([{ t: c.grid_thw[0], h: c.grid_thw[1], w: c.grid_thw[2] }]);
        expectStages(r, ref, CPU_TOL);
      }
      // Several files in one call: block-major groups, each image's rows its own.
      const many = await tower.encodeBatch(cases.cases.map((c) => IMAGES + c.image), { maxPixels: Math.min(...cases.cases.map((c) => c.options.max_pixels ?? Infinity)) });
      for (const r of many) expect(r).not.toBeInstanceOf(Error);
    });

    it('a grid that does not fit the tower is refused before any work, naming the grid', async () => {
      const { input } = caseInput(dir, cases.cases[0]!.name);
      const m = tower.spec.dims['merge_size']!;
      const bad = { t: 1, h: input.grid.h + 1, w: input.grid.w - m };
      const rows = bad.t * bad.h * bad.w;
      const e = await tower.encodePixels({ pixelValues: input.pixelValues.subarray(0, rows * (input.pixelValues.length / (input.grid.h * input.grid.w))), grid: bad }).catch((x: unknown) => x);
      expect((e as { code?: string }).code).toBe('ERR_INVALID_ARGUMENT');
      expect((e as Error).message).toMatch(/grid/);
    });
  });

  it(`${fixture}: tessera inspect names the family, its blocks and the pixel budget`, async () => {
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l), progress: () => undefined, tty: false, columns: 80 };
    expect(await inspectCommand([model], io)).toBe(0);
    const text = lines.join('\n');
    const pre = readJson<{ min_pixels: number; max_pixels: number }>(join(model, 'preprocessor_config.json'));
    expect(text).toContain(`${cases.family} (hf-folder)`);
    expect(text).toContain(`min ${pre.min_pixels} / max ${pre.max_pixels} pixels`);
    expect(text).toMatch(/block\.0 \(x\d+, same shapes\)/);
  });

  describe(`${fixture} in bf16`, () => {
    it(addon().bf16Level === 'none' ? 'falls back to f32 on this CPU, bit for bit' : `every stage within ${BF16_TOL} of HF fp32`, async () => {
      const f32 = await VisionTower.open(model, { backend: 'cpu' });
      const bf = await VisionTower.open(model, { backend: 'cpu', precision: 'bf16' });
      try {
        for (const c of cases.cases) {
          const { ref, input } = caseInput(dir, c.name);
          const r = await bf.encodePixels(input, { stages: true });
          if (bf.info.precision === 'f32') expect(same(r.embeddings, (await f32.encodePixels(input)).embeddings)).toBe(true);
          else expectStages(r, ref, BF16_TOL);
        }
      } finally {
        await f32.close();
        await bf.close();
      }
    });
  });

  describe(`${fixture}: residencies and a packed copy`, () => {
    it('resident, mapped and stream (1 and 2 slots) and the packed folder give bit-identical stages', async () => {
      const { input } = caseInput(dir, cases.cases.at(-1)!.name);
      let reference: EncodeResult | undefined;
      const out = mkdtempSync(join(tmpdir(), 'tessera-qwen2-pack-'));
      try {
        await packModel(await loadModel(model), out);
        const variants = [
          { path: model, residency: 'resident' as const },
          { path: model, residency: 'mapped' as const },
          { path: model, residency: 'stream' as const, slots: 1 },
          { path: model, residency: 'stream' as const, slots: 2 },
          { path: out, residency: 'mapped' as const },
        ];
        for (const { path, ...v } of variants) {
          const tower = await VisionTower.open(path, { backend: 'cpu', ...v });
          try {
            expect(tower.info.family).toBe(cases.family);
            const r = await tower.encodePixels(input, { stages: true });
            if (!reference) reference = r;
            else for (const [name, data] of Object.entries(reference.stages!)) expect(same(r.stages![name]!, data), `${path} ${v.residency}: ${name}`).toBe(true);
          } finally {
            await tower.close();
          }
        }
      } finally {
        rmSync(out, { recursive: true, force: true });
      }
    }, 120_000);
  });
}

describe('a synthetic Qwen2.5-VL tower (the benchmarks\' writer)', () => {
  it('opens with the fixture tower\'s layout and encodes an image whose grid leaves partial windows', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-qwen25-synthetic-'));
    try {
      const size = { depth: 3, hidden_size: 32, num_heads: 2, intermediate_size: 48, out_hidden_size: 40, window_size: 112, fullatt_block_indexes: [1] };
      writeQwen25Folder(dir, size, { minPixels: 3136, maxPixels: 60000 });
      const synthetic = (await loadModel(dir)).spec;
      const fixture = (await loadModel(join(FIXTURES, 'qwen2_5_vl-tiny', 'model'))).spec;
      const roles = (spec: typeof synthetic) => spec.stages.map((s) => [s.name, s.kind, s.tensors.map((t) => t.role)]);
      expect(roles(synthetic)).toEqual(roles(fixture));
      expect(synthetic.dims).toMatchObject({ depth: 3, hidden: 32, heads: 2, intermediate: 48, out_hidden: 40, window: 4 });
      expect(synthetic.lists['fullatt_blocks']).toEqual([1]);
      const tower = await VisionTower.open(dir, { backend: 'cpu' });
      try {
        const r = await tower.encode(IMAGES + 'rocket_thin.png');
        const g = r.grid![0]!;
        expect((g.h / 2) % 4 !== 0 || (g.w / 2) % 4 !== 0).toBe(true);
        expect(r.tokens).toBe((g.t * g.h * g.w) / 4);
        expect(r.width).toBe(40);
        expect(r.embeddings.every(Number.isFinite)).toBe(true);
      } finally {
        await tower.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// The Metal backend's kernels on the MSL emulator (clang >= 15; Debian: clang-19).
const emu = await build({ quiet: true });
describe.skipIf(!emu.available)(`Qwen2 towers on metal-emulated${emu.available ? '' : ` (skipped: ${emu.reason})`}`, () => {
  for (const fixture of ['qwen2_vl-tiny', 'qwen2_5_vl-tiny']) {
    it(`${fixture}: every stage of every case within ${METAL_TOL} of HF`, async () => {
      const dir = join(FIXTURES, fixture);
      const tower = await VisionTower.open(join(dir, 'model'), { backend: 'metal-emulated' });
      try {
        expect(tower.info.backend).toBe('metal-emulated');
        for (const c of readJson<{ cases: Case[] }>(join(dir, 'cases.json')).cases) {
          const { ref, input } = caseInput(dir, c.name);
          expectStages(await tower.encodePixels(input, { stages: true }), ref, METAL_TOL);
        }
      } finally {
        await tower.close();
      }
    }, 300_000);
  }
});
