// The Gemma 4 tower + projector against HF transformers (fp32 on the CPU), through the public API:
// every stage of every fixture case from HF's pixel_values within 1e-4 (max abs error over max abs
// reference), from the HF folder, the llama.cpp mmproj GGUF (f16 matrices: expected_gguf/) and
// Ollama-layout GGUF files written here (per-linear and packed clamps).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { TesseraError, VisionTower } from '../src/index.js';
import { GEMMA4_CASES, GEMMA4_DIR, GEMMA4_MMPROJ, GEMMA4_MODEL, ollamaGgufFromFolder } from './helpers/gemma4-fixtures.js';
import { readTensors, relErr } from './helpers/fixtures.js';

const TOL = 1e-4;
const tmp = mkdtempSync(join(tmpdir(), 'tessera-g4-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function input(name: string) {
  const ref = readTensors(join(GEMMA4_DIR, 'expected', `${name}.safetensors`));
  return {
    ref,
    pixelValues: ref['pixel_values']!.f32(),
    positions: Int32Array.from(ref['positions']!.i64()),
  };
}

/** Checks every stage the reference has; returns the errors for the log. */
async function checkStages(tower: VisionTower, name: string, refDir = 'expected'): Promise<Record<string, number>> {
  const { pixelValues, positions } = input(name);
  const ref = readTensors(join(GEMMA4_DIR, refDir, `${name}.safetensors`));
  const r = await tower.encodePixels({ pixelValues, positions }, { stages: true });
  const names = Object.keys(ref).filter((k) => k !== 'pixel_values' && k !== 'positions');
  expect(names).toContain('projected');
  const errs: Record<string, number> = {};
  for (const s of names) {
    expect(r.stages![s], `stage ${s}`).toBeDefined();
    const err = relErr(r.stages![s]!, ref[s]!.f32());
    errs[s] = err;
    expect(err, `stage ${s}: rel err ${err}`).toBeLessThan(TOL);
  }
  expect(r.embeddings).toEqual(r.stages!['projected']);
  expect(r.width).toBe(tower.info.outHidden);
  expect(r.tokens).toBe(GEMMA4_CASES.find((c) => c.name === name)!.soft_tokens);
  return errs;
}

describe('gemma4-tiny HF folder on the CPU', () => {
  let tower: VisionTower;
  beforeAll(async () => {
    tower = await VisionTower.open(GEMMA4_MODEL, { backend: 'cpu' });
  });
  afterAll(() => tower?.close());

  it('describes itself', () => {
    expect(tower.info).toMatchObject({ family: 'gemma4', source: 'hf-folder', depth: 3, hidden: 64, heads: 4, headDim: 16, outHidden: 96 });
  });

  for (const c of GEMMA4_CASES)
    it(`${c.name}: embed, every block, pooled, projected within ${TOL} of HF`, async () => {
      const errs = await checkStages(tower, c.name);
      expect(Object.keys(errs).sort()).toEqual(['block.0', 'block.1', 'block.2', 'embed', 'pooled', 'projected']);
    });

  it('a padded multi-image call (HF batch layout) equals HF batch and the per-image runs', async () => {
    // HF pads every image to max_soft_tokens·9 rows with zero pixels and position (−1, −1).
    const cases = GEMMA4_CASES.map((c) => input(c.name));
    const padTo = Math.max(...cases.map((c) => c.positions.length / 2)) + 9;
    const pixels = new Float32Array(cases.length * padTo * 768);
    const positions = new Int32Array(cases.length * padTo * 2).fill(-1);
    cases.forEach((c, i) => {
      pixels.set(c.pixelValues, i * padTo * 768);
      positions.set(c.positions, i * padTo * 2);
    });
    const batch = await tower.encodePixels({ pixelValues: pixels, positions, imageRows: cases.map(() => padTo) });
    const ref = readTensors(join(GEMMA4_DIR, 'expected', 'batch.safetensors'));
    expect(relErr(batch.embeddings, ref['projected']!.f32())).toBeLessThan(TOL);
    let row = 0;
    for (const c of cases) {
      const single = await tower.encodePixels({ pixelValues: c.pixelValues, positions: c.positions });
      const slice = batch.embeddings.subarray(row * batch.width, (row + single.tokens) * batch.width);
      expect(relErr(slice, single.embeddings)).toBeLessThan(1e-6);
      row += single.tokens;
    }
    expect(row).toBe(batch.tokens);
  });

  it('progress once per stage, abort, bad positions, close', async () => {
    const { pixelValues, positions } = input('rocket_thin');
    const seen: number[] = [];
    await tower.encodePixels({ pixelValues, positions }, { onProgress: (p) => seen.push(p.block) });
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);

    const ac = new AbortController();
    const aborted = tower.encodePixels({ pixelValues, positions }, {
      signal: ac.signal,
      onProgress: (p) => p.block === 2 && ac.abort(),
    });
    await expect(aborted).rejects.toMatchObject({ code: 'ERR_ABORTED' });

    const bad = Int32Array.from(positions);
    bad[2] = bad[0]!; // patch 1 at patch 0's position
    bad[3] = bad[1]!;
    await expect(tower.encodePixels({ pixelValues, positions: bad })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(
      tower.encodePixels({ pixelValues: pixelValues.subarray(0, 768 * 330), positions: positions.subarray(0, 660) }),
    ).rejects.toBeInstanceOf(TesseraError);

    const other = await VisionTower.open(GEMMA4_MODEL, { backend: 'cpu' });
    await other.close();
    await expect(other.encodePixels({ pixelValues, positions })).rejects.toMatchObject({ code: 'ERR_CLOSED' });
  });
});

describe('gemma4-tiny from GGUF files', () => {
  it('llama.cpp mmproj (f16 matrices): pooled and projected within 1e-4 of expected_gguf', async () => {
    const tower = await VisionTower.open(GEMMA4_MMPROJ, { backend: 'cpu' });
    try {
      expect(tower.info.source).toBe('gguf-llama.cpp');
      for (const c of GEMMA4_CASES) await checkStages(tower, c.name, 'expected_gguf');
    } finally {
      await tower.close();
    }
  });

  for (const clamps of ['scalars', 'packed'] as const)
    it(`Ollama single file, ${clamps} clamps: every stage equals the folder's HF reference`, async () => {
      const path = join(tmp, `ollama-${clamps}.gguf`);
      writeFileSync(path, ollamaGgufFromFolder({ clamps, withTextModel: true }));
      const tower = await VisionTower.open(path, { backend: 'cpu' });
      try {
        expect(tower.info.source).toBe('gguf-ollama');
        await checkStages(tower, 'coffee');
        await checkStages(tower, 'rocket_thin');
      } finally {
        await tower.close();
      }
    });
});
