// precision: 'f32' | 'bf16' on open (docs/bf16.md). tower.info.precision says what runs: bf16 only
// where this CPU has bf16 units (addon().bf16Level), f32 elsewhere, never claimed otherwise. On such
// a CPU the fixture towers in bf16 must land closer to HF's fp32 output than HF's own bf16 does,
// image by image and stage by stage; without one, bf16 falls back to f32 and gives the f32 bits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { VisionTower } from '../src/index.js';
import { addon } from '../src/native.js';
import { isUpToDate, outputJob, stampInput, writeImageOutputs } from '../src/bulk/output-dir.js';
import { FIXTURES, gemmaInput, qwenInput, readJson, readTensors, relErr } from './helpers/fixtures.js';

const UNITS = addon().bf16Level !== 'none';
const FAMILIES = ['qwen3_5-tiny', 'qwen3_vl-tiny', 'qwen2_vl-tiny', 'qwen2_5_vl-tiny', 'gemma4-tiny'];
// HF's own bf16 error against its fp32 (max |diff| / max |ref|), per image and stage, measured with
// torch on an Intel Xeon (Sapphire Rapids class) and kept beside each fixture (hf-bf16.json;
// verify/hf-bf16-error.py; docs/bf16.md). tessera's bf16 must land closer to HF fp32 at each.
const hfBf16 = (family: string) =>
  readJson<{ cases: Record<string, Record<string, number>> }>(join(FIXTURES, family, 'hf-bf16.json')).cases;

function input(family: string, name: string) {
  return family.startsWith('gemma4') ? gemmaInput(name) : qwenInput(family, name);
}

describe('precision', () => {
  it('defaults to f32 and reports what runs; a bad value is ERR_INVALID_ARGUMENT naming precision', async () => {
    const model = join(FIXTURES, 'qwen3_5-tiny', 'model');
    const f32 = await VisionTower.open(model, { backend: 'cpu' });
    const bf = await VisionTower.open(model, { backend: 'cpu', precision: 'bf16' });
    try {
      expect(f32.info.precision).toBe('f32');
      expect(bf.info.precision).toBe(UNITS ? 'bf16' : 'f32');
      expect(['none', 'amx', 'avx512-bf16', 'neon-bf16']).toContain(addon().bf16Level);
    } finally {
      await f32.close();
      await bf.close();
    }
    const bad = await VisionTower.open(model, { precision: 'fp8' as 'f32' }).catch((e: unknown) => e);
    expect(bad).toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    expect(String((bad as Error).message)).toContain('precision');
  });

  for (const family of FAMILIES) {
    describe(`${family} in bf16`, () => {
      const dir = join(FIXTURES, family);
      const cases = readJson<{ cases: { name: string }[] }>(join(dir, 'cases.json')).cases;
      const hf = hfBf16(family);
      let f32: VisionTower, bf: VisionTower;
      beforeAll(async () => {
        f32 = await VisionTower.open(join(dir, 'model'), { backend: 'cpu' });
        bf = await VisionTower.open(join(dir, 'model'), { backend: 'cpu', precision: 'bf16' });
      });
      afterAll(async () => {
        await f32?.close();
        await bf?.close();
      });
      // With bf16 units: the images HF's bf16 was measured on. Without: every image falls back to f32.
      for (const c of cases.filter((c) => !UNITS || hf[c.name])) {
        it(`${c.name}: ${UNITS ? "every stage HF reports closer to HF fp32 than HF's own bf16" : 'falls back to f32, bit for bit'}`, async () => {
          const a = await f32.encodePixels(input(family, c.name), { stages: true });
          const b = await bf.encodePixels(input(family, c.name), { stages: true });
          if (!UNITS) {
            expect(Buffer.from(b.embeddings.buffer).equals(Buffer.from(a.embeddings.buffer))).toBe(true);
            for (const name of Object.keys(a.stages!))
              expect(Buffer.from(b.stages![name]!.buffer).equals(Buffer.from(a.stages![name]!.buffer)), name).toBe(true);
            return;
          }
          const ref = readTensors(join(dir, 'expected', `${c.name}.safetensors`));
          const bounds = Object.entries(hf[c.name]!);
          expect(bounds.length).toBeGreaterThan(2);
          for (const [name, bound] of bounds) {
            const ours = name.startsWith('deepstack.') ? b.deepstack![Number(name.split('.')[1])] : b.stages![name];
            const err = relErr(ours!, ref[name]!.f32());
            expect(err, `stage ${name}: ${err} (HF's bf16: ${bound})`).toBeLessThan(bound);
          }
        });
      }
    });
  }

  it("is part of a bulk output's up-to-date record: an f32 output is not done for a bf16 run", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tessera-precision-'));
    const tower = await VisionTower.open(join(FIXTURES, 'qwen3_5-tiny', 'model'), { backend: 'cpu' });
    try {
      const image = join(FIXTURES, 'images', 'astronaut.jpg');
      const input = { path: image, root: dirname(image), rel: 'astronaut.jpg' };
      const stamp = await stampInput(image, false);
      const job = outputJob(tower, { dir, format: 'safetensors', model: 'm', options: {} });
      expect(job.precision).toBe('f32');
      await writeImageOutputs(job, input, await tower.encode(image), stamp);
      expect(await isUpToDate(job, input, stamp)).toBe(true);
      // the same job from a tower that ran bf16 (only its info differs)
      const bfTower = { info: { ...tower.info, precision: 'bf16' } } as unknown as VisionTower;
      const bfJob = outputJob(bfTower, { dir, format: 'safetensors', model: 'm', options: {} });
      expect(bfJob.precision).toBe('bf16');
      expect(await isUpToDate(bfJob, input, stamp)).toBe(false);
    } finally {
      await tower.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
