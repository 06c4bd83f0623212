// The Qwen2.5-VL side-by-side piece (bench/pieces/qwen25-peer.mjs, ort/model-qwen25.mjs) and the Qwen2.5
// residency bars: the ONNX blocks compute what tessera's blocks compute (a tiny tower, both attention
// variants, rows in window order), the window order is HF's, and the rows and goals are figured and
// written as the section says.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: bench scripts in plain JS, without declarations
import { Q25, ortInputs, permuteRows, windowOrder, writeBlockOnnx, blockFlops25 } from '../pieces/ort/model-qwen25.mjs';
// @ts-expect-error: as above
import { makeSyntheticQwen25 } from '../make-synthetic-qwen25.mjs';
// @ts-expect-error: as above
import { GOALS, TOWER_BLOCKS, goals, hostName, report, rowFigures, towerBlockFlops } from '../pieces/qwen25-peer.mjs';
// @ts-expect-error: as above
import { barsMet } from '../pieces/residency.mjs';
// @ts-expect-error: as above
import { QWEN25_BARS } from '../pieces/residency-qwen25.mjs';

const require = createRequire(fileURLToPath(new URL('../pieces/ort/model-qwen25.mjs', import.meta.url)));
const haveOrt = (() => {
  try {
    require.resolve('onnxruntime-node');
    require.resolve('onnx-proto');
    return true;
  } catch {
    return false;
  }
})();

type F32 = Float32Array;
const relDiff = (a: F32, ref: F32) => {
  let d = 0, m = 0;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i]! - ref[i]!));
    m = Math.max(m, Math.abs(ref[i]!));
  }
  return d / m;
};

describe('windowOrder', () => {
  // Where a processor row lies: its merged token (merge-block raster order) and the patch within it.
  const patchOf = (idx: number, tw: number) => {
    const t = Math.floor(idx / 4), k = idx % 4;
    return { row: 2 * Math.floor(t / tw) + (k >> 1), col: 2 * (t % tw) + (k & 1) };
  };

  it('puts each 8x8-patch window together, windows in raster order, edge windows smaller', () => {
    const grid = { t: 1, h: 12, w: 20 }; // merged 6 x 10: windows of 4x4, 4x4, 4x2 over 2x4, 2x4, 2x2
    const { rows, windows } = windowOrder(grid);
    expect([...rows].sort((a, b) => a - b)).toEqual(Array.from({ length: 240 }, (_, i) => i));
    expect(windows.map(([, n]: number[]) => n)).toEqual([64, 64, 32, 32, 32, 16]);
    let at = 0;
    windows.forEach(([first, n]: number[], wi: number) => {
      expect(first).toBe(at);
      at += n;
      for (let i = first; i < first + n; i++) {
        const p = patchOf(rows[i], grid.w / 2);
        expect([Math.floor(p.row / 8), Math.floor(p.col / 8)]).toEqual([Math.floor(wi / 3), wi % 3]);
      }
      // within a window: merged tokens in raster order, a token's 4 patches together and in order
      for (let i = first + 1; i < first + n; i++) expect(rows[i] > rows[i - 1]).toBe(true);
    });
  });

  it('permuteRows takes rows in the order and puts them back', () => {
    const a = Float32Array.from({ length: 12 }, (_, i) => i);
    const order = [2, 0, 1];
    const p = permuteRows(a, order, 4);
    expect([...p.subarray(0, 4)]).toEqual([8, 9, 10, 11]);
    expect([...permuteRows(p, order, 4, true)]).toEqual([...a]);
  });

  it('the batched ONNX window graph needs whole windows, and says so', () => {
    expect(() => ortInputs({ t: 1, h: 12, w: 20 })).toThrow(/not whole windows/);
    expect(ortInputs({ t: 1, h: 16, w: 24 }).seg).toBe(64);
  });
});

describe.skipIf(!haveOrt)('the ONNX blocks against tessera (needs npm install --prefix bench: onnxruntime-node, onnx-proto)', () => {
  const tiny = { ...Q25, hidden: 64, heads: 2, headDim: 32, mlp: 96 };
  let dir = '';
  let tower = '';
  let files: Record<string, Record<string, string>> = {};
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-qwen25-peer-test-'));
    tower = makeSyntheticQwen25(join(dir, 'tower'), { depth: 2, hidden_size: 64, num_heads: 2, intermediate_size: 96, out_hidden_size: 64, fullatt_block_indexes: [1] });
    files = writeBlockOnnx(tower, dir, [[0, 'window'], [1, 'full']], tiny);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  for (const attn of ['std', 'mha'])
    it(`${attn}: a window block and a full block give tessera's block.0 and block.1 within 1e-4`, async () => {
      const ort = require('onnxruntime-node');
      const { VisionTower } = await import('../../dist/index.js');
      const grid = { t: 1, h: 16, w: 24 }; // 6 windows
      const N = grid.h * grid.w;
      const px = Float32Array.from({ length: N * 1176 }, (_, i) => Math.sin(i * 0.37) * 0.9);
      const t = await VisionTower.open(tower, { backend: 'cpu', residency: 'resident', threads: 1 });
      const r = await t.encodePixels({ pixelValues: px, grid }, { stages: true });
      await t.close();
      const stages = r.stages as Record<string, F32>;
      const { order, cos, sin } = ortInputs(grid, tiny);
      let x: F32 = permuteRows(stages.embed, order, tiny.hidden);
      for (const [kind, stage] of [['window', 'block.0'], ['full', 'block.1']] as const) {
        const s = await ort.InferenceSession.create(files[kind]![attn], { intraOpNumThreads: 1, logSeverityLevel: 3 });
        const feeds: Record<string, unknown> = {
          x: new ort.Tensor('float32', x, [N, tiny.hidden]),
          cos: new ort.Tensor('float32', cos, [N, tiny.headDim / 2]),
          sin: new ort.Tensor('float32', sin, [N, tiny.headDim / 2]),
        };
        if (s.inputNames.includes('pos')) feeds.pos = new ort.Tensor('int64', BigInt64Array.from({ length: N }, (_, i) => BigInt(i)), [1, N]);
        x = (await s.run(feeds)).y.data as F32;
        await s.release();
        const d = relDiff(permuteRows(x, order, tiny.hidden, true), stages[stage]!);
        expect(d).toBeLessThan(1e-4);
      }
      // the order matters: the window block's output left in window order is not tessera's
      expect(relDiff(x, stages['block.1']!)).toBeGreaterThan(1e-2);
    });
});

describe('rows, goals and the section', () => {
  const N = 1024;
  const run = (win: number, full: number) => ({ ms: win + full, foreign: 0, blockMs: [win, full] });
  const row = (engine: string, isa: string, runs: { blockMs: number[] }[]) => ({
    N, grid: { t: 1, h: 32, w: 32 }, engine, isa, threads: 2, kept: runs, rejected: [], maxRssMiB: 300, relDiff: engine.startsWith('ort') ? 2e-6 : undefined,
    ...rowFigures(N, runs),
  });
  const rows = [
    row('tessera', 'avx512', [run(10, 12), run(11, 13), run(30, 40)]),
    row('tessera-bf16', 'avx512-bf16', [run(5, 6), run(5, 6), run(5, 6)]),
    row('ort-mha', 'avx512', [run(12, 14), run(12, 14), run(12, 14)]),
    row('ort-std', 'avx512', [run(13, 13), run(13, 13), run(13, 13)]),
  ];
  const res = { rows, failures: [], peak: { avx512: { isa: 'avx512', gflops: 500 }, 'avx512-bf16': { isa: 'avx512-bf16', gflops: 1000 } }, T: 2, runs: 3, noisy: false, degraded: false, stdMaxN: 4096, genS: 1, loadAtStart: 0, ns: [N], waitS: 1, hostIsa: 'avx512', bf16Isa: 'avx512-bf16', cpu: 'a CPU', minutes: 1, ortVersion: '1.30.0' };

  it('takes medians per block kind and counts the tower as 28 window + 4 full blocks', () => {
    const t = rows[0]!;
    expect([t.winMs, t.fullMs]).toEqual([11, 13]);
    expect(TOWER_BLOCKS).toEqual({ window: 28, full: 4 });
    expect(t.towerMs).toBe(28 * 11 + 4 * 13);
    expect(towerBlockFlops(N)).toBe(28 * blockFlops25(N, 64) + 4 * blockFlops25(N, N));
    expect(t.gflops).toBeCloseTo(towerBlockFlops(N) / (t.towerMs / 1000) / 1e9, 6);
    // a block: four weight GEMMs and the gated MLP's three at 1280 / 3420, and attention over S rows
    expect(blockFlops25(64, 64)).toBe(2 * 64 * (1280 * 3840 + 1280 * 1280 + 3 * 1280 * 3420) + 4 * 64 * 64 * 1280);
  });

  it('compares with the faster ORT variant of each block kind, and states the goals', () => {
    const g = goals(res)[0];
    const ortTower = 28 * 12 + 4 * 13; // mha's window blocks, std's full ones
    expect(g.f32OverOrt).toBeCloseTo(ortTower / rows[0]!.towerMs, 9);
    expect(g.bf16OverF32).toBeCloseTo(rows[0]!.towerMs / rows[1]!.towerMs, 9);
    expect(goals({ ...res, bf16Isa: null })[0].bf16OverF32).toBeNull();
    const body: string = report(res);
    const line = body.split('\n').find((l) => l.includes('| tessera f32 |'))!;
    const cells = line.split('|').map((c) => c.trim());
    expect(cells[4]).toBe('11.0');
    expect(cells[5]).toBe('13.0');
    expect(cells[8]).toBe(`${(12 / 11).toFixed(2)}× / ${(13 / 13).toFixed(2)}× / ${(ortTower / rows[0]!.towerMs).toFixed(2)}×`);
    expect(cells[9]).toBe(`${Math.round((100 * rows[0]!.gflops) / 500)} %`);
    const bf = body.split('\n').find((l) => l.includes('| tessera bf16 |'))!.split('|').map((c) => c.trim());
    expect(bf[9]).toBe(`${Math.round((100 * rows[1]!.gflops) / 1000)} %`); // against the bf16 unit's peak
    const goalRow = body.split('\n').find((l) => l.startsWith('| 1,024 | '))!;
    expect(goalRow).toContain(`${g.f32OverOrt.toFixed(2)}× (${g.f32OverOrt >= GOALS.f32OverOrt ? 'met' : '**missed**'})`);
    expect(goalRow).toContain(`${g.bf16OverF32.toFixed(2)}× (met)`);
    expect(body).toContain('| 1,024 | 2.0e-6 | 2.0e-6 |');
  });
});

describe('hostName', () => {
  it('names the core class from an AMD CPU family, and the vector units', () => {
    const amd = (family: number) => `vendor_id\t: AuthenticAMD\ncpu family\t: ${family}\nmodel\t\t: 2\nmodel name\t: AMD EPYC\n`;
    expect(hostName(amd(26), 2, ['avx512', 'avx512-bf16'])).toBe('AMD EPYC (Zen 5 class), 2 cores, AVX-512/AVX512-BF16');
    expect(hostName(amd(25), 4, ['avx512', null])).toBe('AMD EPYC (Zen 3/4 class), 4 cores, AVX-512');
    expect(hostName('vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel Xeon\n', 16, ['avx512', 'amx'])).toBe('Intel Xeon, 16 cores, AVX-512/AMX-BF16');
  });
});

describe('the Qwen2.5 residency bars', () => {
  const r = (rss: number, ms: number) => ({ peakRssMiB: rss, medianMs: ms });
  it('stream must take at most a quarter of resident RSS at at most 1.1x its time', () => {
    expect(barsMet({ resident: r(1600, 10000), stream: r(400, 11000) }, QWEN25_BARS)).toMatchObject({ rssOk: true, timeOk: true, rssRatio: 0.25, timeRatio: 1.1 });
    expect(barsMet({ resident: r(1600, 10000), stream: r(401, 10000) }, QWEN25_BARS).rssOk).toBe(false);
    expect(barsMet({ resident: r(1600, 10000), stream: r(300, 11001) }, QWEN25_BARS).timeOk).toBe(false);
  });
});
