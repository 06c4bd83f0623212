// `metal-emulated`: the real MSL kernels through the real op layer (native/metal) on the MSL emulator.
//   - every op table-driven against the CPU backend, bit-identical under the four schedule/poison runs
//     (test/native/test_metal_ops.cc, run here with TESSERA_METAL_OPS=1), and again on the kernels compiled
//     with -ffast-math (TESSERA_METAL_OPS=fast: the GPU's tolerance; the towers on them: metal-fastmath.test.ts)
//   - the finite check counted on the device: checkFinite adds count_nonfinite dispatches and no wait
//     (TESSERA_MSLEMU_SYNCS), and an infinity still fails with ERR_NUMERIC naming the stage and token
//   - the tiny fixture towers of all three families (their smallest case) through
//     VisionTower.open(path, { backend: 'metal-emulated' }), every stage within 5e-3 of HF (docs/design.md#numerics)
// Needs the emulator library (clang >= 15, built here on demand); without it these tests say why they skip.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { TesseraError, VisionTower } from '../src/index.js';
import { FIXTURES, readJson, readTensors } from './helpers/fixtures.js';
import { towerCase } from './helpers/metal-towers.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';
// @ts-expect-error: plain ESM build script, no type declarations
import { build as buildNativeTests } from '../scripts/native-tests.mjs';

const TOL = 5e-3;  // docs/design.md#numerics: Metal agreement with HF
const status = await build({ quiet: true });
const title = status.available ? 'metal-emulated' : `metal-emulated (skipped: ${status.reason})`;
if (!status.available) console.warn(`test/metal-ops.test.ts: skipped: ${status.reason}`);
const { bin: BIN } = await buildNativeTests({ quiet: true });

const FAMILIES = [['qwen3_5-tiny', false], ['qwen3_vl-tiny', false], ['gemma4-tiny', true]] as const;
const onMac = process.platform === 'darwin' && process.arch === 'arm64';

// The op cases of test/native/test_metal_ops.cc on `target` (1: the emulator, fast: the emulator's fast-math
// kernels, metal: the GPU).
// The op cases ('metal:'), and on the IEEE build also the memory plan's ('metal scratch:', whole tower encodes:
// left out of the fast-math and sanitizer runs, whose subject is the kernels).
function nativeOps(target: '1' | 'fast' | 'metal') {
  const lib = target === 'fast' ? { TESSERA_MSLEMU_LIB: status.fastMathLib as string } : {};
  const r = spawnSync(BIN, [target === '1' ? 'metal' : 'metal:'], { env: { ...process.env, ...lib, TESSERA_METAL_OPS: target }, encoding: 'utf8', timeout: 170_000 });
  const out = r.stdout + r.stderr;
  expect(r.status, out.split('\n').filter((l) => !l.startsWith('ok')).join('\n')).toBe(0);
  expect(out).toMatch(/^[1-9]\d* passed, 0 failed$/m);
  expect(out).toContain('ok   metal: attention');
  if (target === '1') expect(out).toContain('ok   metal scratch: a Qwen encode');
}

// The smallest fixture case of each family, every stage within TOL of HF.
function towers(backend: 'metal' | 'metal-emulated', all: boolean) {
  for (const [family, gemma] of FAMILIES) {
    it(`${family}: ${all ? 'every' : 'the smallest'} fixture case, every stage within ${TOL} of HF`, async () => {
      const cases = readJson<{ cases: { name: string; patches: number }[] }>(join(FIXTURES, family, 'cases.json')).cases;
      const chosen = all ? cases : [[...cases].sort((a, b) => a.patches - b.patches)[0]!];
      for (const c of chosen) {
        const errs = await towerCase(family, c.name, gemma, backend);
        for (const [name, err] of Object.entries(errs)) expect(err, `${family}/${c.name} stage ${name}: rel err ${err}`).toBeLessThan(TOL);
      }
    }, 120_000);
  }
}

describe.skipIf(!status.available)(title, () => {
  it('every op vs the CPU backend (odd sizes, dtypes, strides), bit-identical under 4 schedule/poison runs', () => nativeOps('1'), 180_000);
  it('the same on the kernels compiled with -ffast-math (finite-math-only, as Metal\'s fast math), within the GPU tolerance', () => nativeOps('fast'), 180_000);
  it('counted traffic within the design bars (docs/metal.md#counted-traffic)', () => {
    const r = spawnSync(BIN, ['metal counts:'], { env: { ...process.env, TESSERA_METAL_OPS: '1' }, encoding: 'utf8', timeout: 170_000 });
    const out = r.stdout + r.stderr;
    expect(r.status, out).toBe(0);
    expect(out).toMatch(/^1 passed, 0 failed$/m);
  }, 180_000);
  towers('metal-emulated', false);

  it('the finite check runs on the device: one count_nonfinite per stage in the batches, no wait of its own; an infinity is ERR_NUMERIC naming its stage', async () => {
    const dir = join(FIXTURES, 'qwen3_5-tiny');
    const ref = readTensors(join(dir, 'expected', 'rocket_thin.safetensors'));
    const [t, h, w] = ref['image_grid_thw']!.i64();
    const input = { pixelValues: ref['pixel_values']!.f32(), grid: { t: t!, h: h!, w: w! } };
    const tmp = mkdtempSync(join(tmpdir(), 'tessera-syncs-'));
    // One encode's batches and waits, from the emulator executor's log (read when the backend is created).
    const encode = async (checkFinite: boolean, pixelValues = input.pixelValues) => {
      const file = join(tmp, `syncs-${checkFinite}-${pixelValues === input.pixelValues}.log`);
      process.env['TESSERA_MSLEMU_SYNCS'] = file;
      const tower = await VisionTower.open(join(dir, 'model'), { backend: 'metal-emulated' });
      delete process.env['TESSERA_MSLEMU_SYNCS'];
      let error: unknown;
      try {
        await tower.encodePixels({ ...input, pixelValues }, { checkFinite });
      } catch (e) {
        error = e;
      } finally {
        await tower.close();
      }
      const lines = readFileSync(file, 'utf8').trim().split('\n');
      return {
        stages: tower.spec.stages.length,
        waits: lines.filter((l) => l === 'wait').length,
        checks: lines.flatMap((l) => l.split(' ')).filter((k) => k === 'count_nonfinite').length,
        error,
      };
    };
    try {
      const on = await encode(true), off = await encode(false);
      expect(on.error).toBeUndefined();
      expect(on.checks).toBe(on.stages);
      expect(off.checks).toBe(0);
      expect(on.waits, 'the check must not add a wait').toBe(off.waits);
      const px = input.pixelValues.slice();
      px[5 * input.pixelValues.length / (t! * h! * w!) + 7] = Infinity;
      const bad = await encode(true, px);
      expect(bad.error).toBeInstanceOf(TesseraError);
      expect((bad.error as TesseraError).code).toBe('ERR_NUMERIC');
      expect((bad.error as TesseraError).message).toMatch(/^stage 'embed' produced \d+ non-finite value\(s\); the first at token 5, channel /);
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 120_000);

  it('a whole tower is bit-identical under another schedule and poison (TESSERA_MSLEMU_SCHEDULE / _POISON)', async () => {
    const dir = join(FIXTURES, 'qwen3_5-tiny');
    const ref = readTensors(join(dir, 'expected', 'rocket_thin.safetensors'));
    const [t, h, w] = ref['image_grid_thw']!.i64();
    const input = { pixelValues: ref['pixel_values']!.f32(), grid: { t: t!, h: h!, w: w! } };
    const encode = async (schedule: string, poison: string) => {
      process.env['TESSERA_MSLEMU_SCHEDULE'] = schedule;  // read when the backend is created (open)
      process.env['TESSERA_MSLEMU_POISON'] = poison;
      const tower = await VisionTower.open(join(dir, 'model'), { backend: 'metal-emulated' });
      try {
        return (await tower.encodePixels(input)).embeddings;
      } finally {
        await tower.close();
        delete process.env['TESSERA_MSLEMU_SCHEDULE'];
        delete process.env['TESSERA_MSLEMU_POISON'];
      }
    };
    const a = await encode('forward', 'ff');
    const b = await encode('shuffled:7', '55');
    expect(Buffer.from(b.buffer, b.byteOffset, b.byteLength).equals(Buffer.from(a.buffer, a.byteOffset, a.byteLength))).toBe(true);
  }, 60_000);
});

// `npm run test:metal` on a Mac (tools/test-metal.mjs sets TESSERA_TEST_METAL=1): the same checks on the GPU.
// Defined only there: on other machines these tests do not exist (rather than being skipped).
if (onMac && process.env['TESSERA_TEST_METAL'] === '1') {
  describe('metal on the GPU (npm run test:metal, macOS arm64 only)', () => {
    it('every op vs the CPU backend within 5e-3, each twice bit-identical; every kernel a pipeline', () => nativeOps('metal'), 180_000);
    towers('metal', true);
  });
}

describe('metal backends that cannot run here', () => {
  it.skipIf(process.platform === 'darwin')("backend 'metal' off macOS is ERR_BACKEND_UNAVAILABLE", async () => {
    const err = await VisionTower.open(join(FIXTURES, 'qwen3_5-tiny', 'model'), { backend: 'metal' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TesseraError);
    expect((err as TesseraError).code).toBe('ERR_BACKEND_UNAVAILABLE');
  });
});
