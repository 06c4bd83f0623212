// precisions 'f16' and 'bf16' on Metal (docs/metal.md#half-precision), through the emulator: activations stored as
// half (bfloat) between ops, half (bfloat) GEMM and attention tiles. Every image of every family's fixture tower
// runs both, info.precision says which ran, and every stage HF reports lands within HF's own error in that type
// against its fp32: hf-f16.json (measured on a CUDA GPU; plus that GPU's fp32 offset from expected/, which tessera
// is measured against) and hf-bf16.json (HF's bf16 on the CPU, the CPU's bf16 budget too). Gemma 4 meets them with
// its q, k and v kept f32 (native/models/gemma4/block.h; docs/metal.md#accuracy has the numbers).
// The CPU has no half path: it runs f32 for 'f16' and says so, bit for bit.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { addon } from '../src/native.js';
import { PRECISIONS } from '../src/options.js';
import { FIXTURES, qwenInput, readJson } from './helpers/fixtures.js';
import { towerCase } from './helpers/metal-towers.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';

const status = await build({ quiet: true });
if (!status.available) console.warn(`test/metal-half.test.ts: skipped: ${status.reason}`);
const FAMILIES = [['qwen3_5-tiny', false], ['qwen3_vl-tiny', false], ['qwen2_vl-tiny', false], ['qwen2_5_vl-tiny', false], ['gemma4-tiny', true]] as const;

describe('precision f16', () => {
  it("the precision list is one: the addon's and PRECISIONS", () => {
    expect([...addon().precisions]).toEqual([...PRECISIONS]);
  });

  it('on the CPU, f16 runs f32 and says so, bit for bit', async () => {
    const model = join(FIXTURES, 'qwen3_5-tiny', 'model');
    const a = await VisionTower.open(model, { backend: 'cpu' });
    const b = await VisionTower.open(model, { backend: 'cpu', precision: 'f16' });
    try {
      expect(b.info.precision).toBe('f32');
      const x = await a.encodePixels(qwenInput('qwen3_5-tiny', 'tiny'));
      const y = await b.encodePixels(qwenInput('qwen3_5-tiny', 'tiny'));
      expect(Buffer.from(y.embeddings.buffer).equals(Buffer.from(x.embeddings.buffer))).toBe(true);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe.skipIf(!status.available)(status.available ? 'precisions f16 and bf16 on metal-emulated' : `precisions f16 and bf16 on metal-emulated (skipped: ${status.reason})`, () => {
  for (const [family, gemma] of FAMILIES) {
    type Budget = { cases: Record<string, Record<string, number>>; fp32_vs_expected?: Record<string, Record<string, number>> };
    const budget = readJson<Budget>(join(FIXTURES, family, 'hf-f16.json'));
    for (const name of Object.keys(budget.cases)) {
      it(`${family}/${name}: every stage within HF's own fp16 error`, async () => {
        const errs = await towerCase(family, name, gemma, 'metal-emulated', 'f16');
        const bounds = Object.entries(budget.cases[name]!);
        expect(bounds.length).toBeGreaterThan(2);
        for (const [stage, hfErr] of bounds) {
          const bound = hfErr + (budget.fp32_vs_expected?.[name]?.[stage] ?? 0);
          expect(errs[stage], `stage ${stage}`).toBeDefined();
          expect(errs[stage]!, `${family}/${name} stage ${stage}: ${errs[stage]} (HF's own fp16: ${bound})`).toBeLessThan(bound);
        }
        // and not f32 in disguise: half storage moves every stage past the emulator's f32 agreement (~1e-6)
        expect(Math.max(...Object.values(errs))).toBeGreaterThan(1e-4);
      }, 300_000);
    }
    const bf16 = readJson<Budget>(join(FIXTURES, family, 'hf-bf16.json'));
    for (const name of Object.keys(bf16.cases)) {
      it(`${family}/${name}: bf16, every stage within HF's own bf16 error`, async () => {
        const errs = await towerCase(family, name, gemma, 'metal-emulated', 'bf16');
        const bounds = Object.entries(bf16.cases[name]!);
        expect(bounds.length).toBeGreaterThan(2);
        for (const [stage, hfErr] of bounds) {
          expect(errs[stage], `stage ${stage}`).toBeDefined();
          expect(errs[stage]!, `${family}/${name} stage ${stage}: ${errs[stage]} (HF's own bf16: ${hfErr})`).toBeLessThan(hfErr);
        }
        // bfloat storage, not half or f32: bf16's 8 significant bits move the stages past half's errors (~1e-3)
        expect(Math.max(...Object.values(errs))).toBeGreaterThan(2e-3);
      }, 300_000);
    }
  }
});
