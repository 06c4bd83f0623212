// The Gemma 4 tower + projector against HF transformers (fp32 on the CPU), through the public API:
// every stage of every fixture case from HF's pixel_values within 1e-4 (max abs error over max abs
// reference), from the HF folder, the llama.cpp mmproj GGUF (f16 matrices: expected_gguf/) and
// Ollama-layout GGUF files written here (per-linear and packed clamps).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { TesseraError, VisionTower } from '../src/index.js';
import { GEMMA4_CASES, GEMMA4_DIR, GEMMA4_MMPROJ, GEMMA4_MODEL, ollamaGgufFromFolder } from './helpers/gemma4-fixtures.js';
import { readTensors, relErr, seededRandom } from './helpers/fixtures.js';
import { GGML, type TensorIn } from './helpers/gguf-writer.js';

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

    // Abort between stages: at the first progress event of an encode whose stages take tens of ms
    // each (a 96x96 patch grid), so the worker is still mid-tower when the flag is set.
    const side = 96;
    const bigPositions = new Int32Array(side * side * 2).map((_, i) => (i % 2 === 0 ? (i >> 1) % side : Math.floor((i >> 1) / side)));
    const bigPixels = new Float32Array(side * side * 768).map((_, i) => (Math.sin(i * 0.01) + 1) / 2);
    const ac = new AbortController();
    const partial: number[] = [];
    const aborted = tower.encodePixels({ pixelValues: bigPixels, positions: bigPositions }, {
      signal: ac.signal,
      onProgress: (p) => (partial.push(p.block), ac.abort()),
    });
    await expect(aborted).rejects.toMatchObject({ code: 'ERR_ABORTED' });
    expect(partial.length).toBeLessThan(6);

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

describe('gemma4-tiny GGUF variants', () => {
  it('a per-block out_scale multiplies that block output (1.0 changes nothing)', async () => {
    const scale = (b: number) => ({
      name: `v.blk.${b}.out_scale.weight`, ne: [1], type: GGML.F32, data: new Uint8Array(Float32Array.of(b === 2 ? 2 : 1).buffer),
    });
    const path = join(tmp, 'ollama-out-scale.gguf');
    writeFileSync(path, ollamaGgufFromFolder({ clamps: 'scalars', extraTensors: [scale(0), scale(1), scale(2)] }));
    const tower = await VisionTower.open(path, { backend: 'cpu' });
    try {
      const { ref, pixelValues, positions } = input('rocket_thin');
      const r = await tower.encodePixels({ pixelValues, positions }, { stages: true });
      for (const s of ['embed', 'block.0', 'block.1']) expect(relErr(r.stages![s]!, ref[s]!.f32())).toBeLessThan(TOL);
      expect(relErr(r.stages!['block.2']!, ref['block.2']!.f32().map((x) => 2 * x))).toBeLessThan(TOL);
    } finally {
      await tower.close();
    }
  });

  it('BF16 matrices load and stay within bf16 rounding of the f32 reference', async () => {
    const toBf16 = (t: TensorIn): TensorIn => {
      if (t.type !== GGML.F32 || t.ne.length < 2 || t.name.startsWith('v.position')) return t;
      const f = new Float32Array(t.data.slice().buffer);
      const u = new Uint32Array(f.buffer);
      const out = new Uint16Array(f.length);
      for (let i = 0; i < f.length; i++) out[i] = (u[i]! + 0x7fff + ((u[i]! >>> 16) & 1)) >>> 16;
      return { ...t, type: GGML.BF16, data: new Uint8Array(out.buffer) };
    };
    const path = join(tmp, 'ollama-bf16.gguf');
    writeFileSync(path, ollamaGgufFromFolder({ clamps: 'scalars', patch: toBf16 }));
    const tower = await VisionTower.open(path, { backend: 'cpu' });
    try {
      expect(tower.spec.stages[1]!.tensors.find((t) => t.role === 'self_attn.q_proj.linear.weight')!.dtype).toBe('bf16');
      const { ref, pixelValues, positions } = input('coffee');
      const r = await tower.encodePixels({ pixelValues, positions }, { stages: true });
      const err = relErr(r.embeddings, ref['projected']!.f32());
      expect(err).toBeGreaterThan(1e-5); // the weights really are rounded
      expect(err).toBeLessThan(3e-2);
    } finally {
      await tower.close();
    }
  });
});

describe('gemma4-tiny packed clamps: all-zero entries mean "no clamp"', () => {
  it('an all-zero v.clamp_data equals a file without clamps, and clamps do matter on this fixture', async () => {
    const { ref, pixelValues, positions } = input('coffee');
    const run = async (clamps: 'none' | 'packed-zeros') => {
      const path = join(tmp, `ollama-${clamps}.gguf`);
      writeFileSync(path, ollamaGgufFromFolder({ clamps }));
      const tower = await VisionTower.open(path, { backend: 'cpu' });
      try {
        return (await tower.encodePixels({ pixelValues, positions })).embeddings;
      } finally {
        await tower.close();
      }
    };
    const none = await run('none');
    const zeros = await run('packed-zeros');
    expect(relErr(zeros, none)).toBe(0);
    expect(relErr(none, ref['projected']!.f32())).toBeGreaterThan(1e-3);
  });
});

describe('gemma4-tiny mmproj fuzz through the tower', () => {
  it('byte-flipped files either encode or fail with a TesseraError, never crash', async () => {
    const rand = seededRandom(12345); // deterministic: a failure reproduces
    const fixture = readFileSync(GEMMA4_MMPROJ);
    const { pixelValues, positions } = input('rocket_thin');
    const outcomes: string[] = [];
    for (let i = 0; i < 16; i++) {
      const b = Buffer.from(fixture);
      for (let f = 0; f < 3; f++) {
        // Mostly the header (metadata, tensor infos), sometimes the data.
        const at = Math.floor(rand() * (rand() < 0.7 ? 8256 : b.length));
        b[at] = Math.floor(rand() * 256);
      }
      const path = join(tmp, `fuzz-${i}.gguf`);
      writeFileSync(path, b);
      try {
        const tower = await VisionTower.open(path, { backend: 'cpu' });
        try {
          await tower.encodePixels({ pixelValues, positions });
          outcomes.push('ok');
        } finally {
          await tower.close();
        }
      } catch (e) {
        expect(e).toBeInstanceOf(TesseraError);
        outcomes.push((e as TesseraError).code);
      }
    }
    expect(outcomes.length).toBe(16);
  });
});
