// The three residencies through the public API: bit-identical outputs (every stage) for
// resident, mapped and stream with K = 1..4, on every fixture family and source (a sharded bf16
// folder, an f16 folder with deepstack, an f32 Gemma folder and its f16 GGUF); a block-major call
// reads the weights once however many images it carries; tower.info.memory and TESSERA_RESIDENCY.
// (resident's weights are packed at open, the others' per call: the comparison covers both.)
import { closeSync, copyFileSync, openSync, renameSync, rmSync, truncateSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { FIXTURES, gemmaInput, qwenInput } from './helpers/fixtures.js';
import { GEMMA4_MMPROJ, GEMMA4_MODEL } from './helpers/gemma4-fixtures.js';
import { copyModel, readRaw, writeRaw } from './helpers/model-copy.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';

type Input = Parameters<VisionTower['encodePixels']>[0];


const models: { label: string; path: string; input: () => Input }[] = [
  { label: 'qwen3_5-tiny (sharded bf16)', path: join(FIXTURES, 'qwen3_5-tiny', 'model'), input: () => qwenInput('qwen3_5-tiny', 'coffee') },
  { label: 'qwen3_vl-tiny (f16, deepstack)', path: join(FIXTURES, 'qwen3_vl-tiny', 'model'), input: () => qwenInput('qwen3_vl-tiny', 'tiny') },
  { label: 'gemma4-tiny (f32 folder)', path: GEMMA4_MODEL, input: () => gemmaInput('tiny') },
  { label: 'gemma4-tiny (mmproj GGUF)', path: GEMMA4_MMPROJ, input: () => gemmaInput('tiny') },
];

const variants = [
  { residency: 'resident' as const },
  { residency: 'mapped' as const },
  ...[1, 2, 3, 4].map((slots) => ({ residency: 'stream' as const, slots })),
];

describe('residencies give bit-identical results', () => {
  for (const m of models)
    it(m.label, async () => {
      const input = m.input();
      let reference: Awaited<ReturnType<VisionTower['encodePixels']>> | undefined;
      for (const v of variants) {
        const tower = await VisionTower.open(m.path, { backend: 'cpu', ...v });
        try {
          expect(tower.info.residency).toBe(v.residency);
          // resident's linear weights are rearranged in place at open (the CPU's panel layout),
          // the others' are packed per call: so this also compares the two GEMM weight paths.
          if (v.residency === 'resident') expect(tower.stats().packedWeights).toBeGreaterThan(0);
          else expect(tower.stats().packedWeights).toBe(0);
          // Twice: the second pass runs over slots the first one left behind.
          for (let pass = 0; pass < 2; pass++) {
            const r = await tower.encodePixels(input, { stages: true });
            if (!reference) {
              reference = r;
              continue;
            }
            const label = `${v.residency}${'slots' in v ? ` K=${v.slots}` : ''} pass ${pass}`;
            expect(Object.keys(r.stages!), label).toEqual(Object.keys(reference.stages!));
            for (const [name, data] of Object.entries(reference.stages!))
              expect(Buffer.from(r.stages![name]!.buffer).equals(Buffer.from(data.buffer)), `${label}: stage ${name}`).toBe(true);
            expect(Buffer.from(r.embeddings.buffer).equals(Buffer.from(reference.embeddings.buffer)), label).toBe(true);
            expect(tower.stats().violations, label).toBe(0); // the ring's instrument
            for (const [k, ds] of (reference.deepstack ?? []).entries())
              expect(Buffer.from(r.deepstack![k]!.buffer).equals(Buffer.from(ds.buffer)), `${label}: deepstack ${k}`).toBe(true);
          }
        } finally {
          await tower.close();
        }
      }
    });
});

describe('stream reads', () => {
  it('a block-major call reads the weights once, whatever the number of images', async () => {
    const family = 'qwen3_5-tiny';
    const cases = ['coffee', 'tiny', 'rocket_thin'].map((n) => qwenInput(family, n) as { pixelValues: Float32Array; grid: { t: number; h: number; w: number } });
    const all = new Float32Array(cases.reduce((a, c) => a + c.pixelValues.length, 0));
    let off = 0;
    for (const c of cases) all.set(c.pixelValues, off), (off += c.pixelValues.length);
    const tower = await VisionTower.open(join(FIXTURES, family, 'model'), { backend: 'cpu', residency: 'stream', slots: 2 });
    try {
      const before = tower.stats().bytesRead;
      await tower.encodePixels(cases[0]!);
      const one = tower.stats().bytesRead - before;
      await tower.encodePixels({ pixelValues: all, grid: cases.map((c) => c.grid) });
      const three = tower.stats().bytesRead - before - one;
      // 5 stages, 2 slots: nothing survives a pass, so each pass reads every stage exactly once.
      expect(one).toBe(tower.info.memory.fileBytes);
      expect(three).toBe(one);
      // One image at a time reads them once per image: what block-major batches avoid.
      for (const c of cases) await tower.encodePixels(c);
      expect(tower.stats().bytesRead - before - one - three).toBe(3 * one);
    } finally {
      await tower.close();
    }
  });
});

describe('tower.info.memory and TESSERA_RESIDENCY', () => {
  const saved = process.env['TESSERA_RESIDENCY'];
  afterEach(() => {
    if (saved === undefined) delete process.env['TESSERA_RESIDENCY'];
    else process.env['TESSERA_RESIDENCY'] = saved;
  });
  const path = join(FIXTURES, 'qwen3_vl-tiny', 'model');

  it('states what each residency holds, from the native formulas', async () => {
    delete process.env['TESSERA_RESIDENCY'];
    const stream = await VisionTower.open(path, { backend: 'cpu', residency: 'stream', slots: 3 });
    const resident = await VisionTower.open(path, { backend: 'cpu', residency: 'resident' });
    const auto = await VisionTower.open(path, { backend: 'cpu' });
    try {
      const m = stream.info.memory;
      expect(m.slots).toBe(3);
      expect(m.slotBytes % 16384).toBe(0);
      expect(m.slotBytes).toBeGreaterThanOrEqual(stream.info.bytes.perBlock);
      expect(m.streamBytes).toBe(3 * m.slotBytes);
      expect(m.weightBytes).toBe(m.streamBytes);
      expect(stream.stats().residentBytes).toBe(m.weightBytes); // the store holds what was predicted
      expect(resident.info.memory.weightBytes).toBe(resident.info.memory.residentBytes);
      expect(resident.stats().residentBytes).toBe(resident.info.memory.residentBytes);
      expect(resident.info.memory.residentBytes).toBeGreaterThanOrEqual(resident.info.bytes.total);
      expect(m.fileBytes).toBeGreaterThanOrEqual(stream.info.bytes.total);
      expect(m.peakRss).toBeGreaterThan(0);
      // A tiny tower fits anywhere: auto keeps it resident and says why.
      expect(auto.info.residency).toBe('resident');
      expect(auto.info.memory.reason).toMatch(/^auto/);
      // A budget too small for the weights makes auto stream.
      const budgeted = await VisionTower.open(path, { backend: 'cpu', memoryBudget: Math.floor(resident.info.memory.residentBytes * 1.5) });
      expect(budgeted.info.residency).toBe('stream');
      await budgeted.close();
    } finally {
      await Promise.all([stream.close(), resident.close(), auto.close()]);
    }
  });

  it('TESSERA_RESIDENCY overrides the option; a bad value is ERR_INVALID_ARGUMENT', async () => {
    process.env['TESSERA_RESIDENCY'] = 'mapped';
    const t = await VisionTower.open(path, { backend: 'cpu', residency: 'resident' });
    expect(t.info.residency).toBe('mapped');
    expect(t.info.memory.reason).toMatch(/TESSERA_RESIDENCY/);
    await t.close();
    process.env['TESSERA_RESIDENCY'] = 'floppy';
    await expect(VisionTower.open(path, { backend: 'cpu' })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});

describe('stream failures through the API', () => {
  it('a weights file truncated after open: ERR_WEIGHTS_CORRUPT naming it, and the tower still closes', async () => {
    const dir = copyModel(join(FIXTURES, 'qwen3_vl-tiny', 'model'));
    try {
      const tower = await VisionTower.open(dir, { backend: 'cpu', residency: 'stream', slots: 2 });
      const file = tower.spec.files[0]!;
      const last = tower.spec.stages.at(-1)!.tensors[0]!;
      truncateSync(file, last.offset + 1);
      const e = await tower.encodePixels(qwenInput('qwen3_vl-tiny', 'tiny')).catch((x: unknown) => x);
      expect(e).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT' });
      expect((e as Error).message).toContain(file);
      await tower.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an encode aborted mid-pass leaves the ring usable: the next encode is bit-identical', async () => {
    const path = join(FIXTURES, 'qwen3_vl-tiny', 'model');
    // Sixteen images in one call: long enough that the abort (sent from the JS thread at the
    // first progress event) lands between stages, well before the last one.
    const one = qwenInput('qwen3_vl-tiny', 'coffee') as { pixelValues: Float32Array; grid: { t: number; h: number; w: number } };
    const pixels = new Float32Array(one.pixelValues.length * 16);
    for (let i = 0; i < 16; i++) pixels.set(one.pixelValues, i * one.pixelValues.length);
    const input = { pixelValues: pixels, grid: Array.from({ length: 16 }, () => one.grid) };
    const tower = await VisionTower.open(path, { backend: 'cpu', residency: 'stream', slots: 2 });
    try {
      const reference = await tower.encodePixels(input);
      const ctl = new AbortController();
      const aborted = tower.encodePixels(input, { signal: ctl.signal, onProgress: (p) => p.block === 1 && ctl.abort() });
      await expect(aborted).rejects.toMatchObject({ code: 'ERR_ABORTED' });
      const again = await tower.encodePixels(input);
      expect(Buffer.from(again.embeddings.buffer).equals(Buffer.from(reference.embeddings.buffer))).toBe(true);
    } finally {
      await tower.close();
    }
  });
});

// The Metal op layer on the MSL emulator: the slots and mapping windows are wrapped zero-copy as
// on a Mac, and completions arrive from the executor. Needs the emulator (clang >= 15).
const emu = await build({ quiet: true });
describe.skipIf(!emu.available)(`residencies on metal-emulated${emu.available ? '' : ` (skipped: ${emu.reason})`}`, () => {
  it('qwen3_5-tiny: resident, mapped and stream (K = 1, 2) bit-identical', async () => {
    const input = qwenInput('qwen3_5-tiny', 'tiny');
    let reference: Awaited<ReturnType<VisionTower['encodePixels']>> | undefined;
    for (const v of [{ residency: 'resident' as const }, { residency: 'mapped' as const }, { residency: 'stream' as const, slots: 1 }, { residency: 'stream' as const, slots: 2 }]) {
      const tower = await VisionTower.open(join(FIXTURES, 'qwen3_5-tiny', 'model'), { backend: 'metal-emulated', ...v });
      try {
        const r = await tower.encodePixels(input, { stages: true });
        if (!reference) reference = r;
        else
          for (const [name, data] of Object.entries(reference.stages!))
            expect(Buffer.from(r.stages![name]!.buffer).equals(Buffer.from(data.buffer)), `${v.residency} ${'slots' in v ? v.slots : ''}: ${name}`).toBe(true);
        expect(tower.stats().violations).toBe(0);
      } finally {
        await tower.close();
      }
    }
  }, 120_000);

  it('a safetensors file whose unpadded header leaves every tensor off its element size encodes as the padded one, CPU and Metal, every residency', async () => {
    // The header one byte longer than its JSON (trailing whitespace, which the format allows): every tensor
    // starts at an odd offset. Each is read (or, mapped, copied) to an aligned place of its own.
    const src = join(FIXTURES, 'qwen2_vl-tiny', 'model');
    const dir = copyModel(src);
    try {
      const file = join(dir, 'model.safetensors');
      const raw = readRaw(file);
      writeRaw(file, JSON.stringify(raw.header) + ' ', raw.data);
      const input = qwenInput('qwen2_vl-tiny', 'rocket_thin');
      for (const backend of ['cpu', 'metal-emulated'] as const) {
        const padded = await VisionTower.open(src, { backend });
        const want = await padded.encodePixels(input, { stages: true });
        await padded.close();
        for (const residency of ['resident', 'mapped', 'stream'] as const) {
          const tower = await VisionTower.open(dir, { backend, residency });
          try {
            expect(tower.spec.stages.flatMap((st) => st.tensors).every((t) => t.offset % 2 === 1)).toBe(true);
            const got = await tower.encodePixels(input, { stages: true });
            for (const [name, data] of Object.entries(want.stages!))
              expect(Buffer.from(got.stages![name]!.buffer).equals(Buffer.from(data.buffer)), `${backend} ${residency}: ${name}`).toBe(true);
          } finally {
            await tower.close();
          }
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('a weight file changed under an open tower (docs/memory.md)', () => {
  const src = join(FIXTURES, 'qwen3_vl-tiny', 'model');
  const input = () => qwenInput('qwen3_vl-tiny', 'tiny');
  type Change = 'in place' | 'truncated' | 'renamed over';
  // What docs/memory.md's table promises, per residency and change: 'same' (the result at open),
  // 'changed' (the new bytes are read) or an error code.
  const expected: Record<string, Record<Change, string>> = {
    resident: { 'in place': 'same', truncated: 'same', 'renamed over': 'same' },
    stream: { 'in place': 'changed', truncated: 'ERR_WEIGHTS_CORRUPT', 'renamed over': 'same' },
    mapped: { 'in place': 'changed', truncated: 'ERR_WEIGHTS_CORRUPT', 'renamed over': 'same' },
  };
  for (const [residency, outcomes] of Object.entries(expected))
    for (const [change, want] of Object.entries(outcomes) as [Change, string][])
      it(`${residency}, file ${change}: ${want}`, async () => {
        const dir = copyModel(src);
        try {
          const tower = await VisionTower.open(dir, { backend: 'cpu', residency: residency as 'resident' | 'stream' | 'mapped' });
          const before = await tower.encodePixels(input());
          const file = tower.spec.files[0]!;
          const merger = tower.spec.stages.at(-1)!.tensors.find((t) => t.role === 'linear_fc2.weight')!;
          if (change === 'truncated') truncateSync(file, merger.offset + 1);
          else {
            const target = change === 'in place' ? file : `${file}.new`;
            if (change === 'renamed over') copyFileSync(file, target);
            const fd = openSync(target, 'r+');
            writeSync(fd, Buffer.alloc(merger.length), 0, merger.length, merger.offset); // the merger's output weights zeroed
            closeSync(fd);
            if (change === 'renamed over') renameSync(target, file);
          }
          const after = await tower.encodePixels(input()).catch((e: { code: string }) => e);
          await tower.close();
          if (want.startsWith('ERR_')) expect(after).toMatchObject({ code: want, message: expect.stringContaining(file) });
          else {
            const same = Buffer.from((after as typeof before).embeddings.buffer).equals(Buffer.from(before.embeddings.buffer));
            expect(same ? 'same' : 'changed').toBe(want);
          }
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });
});
