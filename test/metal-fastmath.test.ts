// The fixture towers on the emulator library whose kernels were compiled with clang's -ffast-math (the
// assumptions Metal's fast math lets Apple's compiler make: no infinities or NaNs, reassociation,
// contraction): every stage of the smallest case of each family within the Metal tolerance of HF, as on the
// GPU. A file of its own: the addon loads the emulator library once per process (TESSERA_MSLEMU_LIB, set
// here before the first tower opens). The op cases on the same library: test/metal-ops.test.ts.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES, readJson } from './helpers/fixtures.js';
import { towerCase } from './helpers/metal-towers.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';

const TOL = 5e-3;  // docs/design.md#numerics: Metal agreement with HF
const status = await build({ quiet: true });
if (!status.available) console.warn(`test/metal-fastmath.test.ts: skipped: ${status.reason}`);
else process.env['TESSERA_MSLEMU_LIB'] = status.fastMathLib;

const FAMILIES = [['qwen3_5-tiny', false], ['qwen3_vl-tiny', false], ['qwen2_vl-tiny', false], ['qwen2_5_vl-tiny', false], ['gemma4-tiny', true]] as const;

describe.skipIf(!status.available)(status.available ? 'metal-emulated, kernels under -ffast-math' : `metal-emulated, kernels under -ffast-math (skipped: ${status.reason})`, () => {
  it('half rounds every operation to binary16 under fast math too (the self-test kernel built with -ffast-math)', () => {
    const r = spawnSync(join(status.fastMathLib, '..', 'selftest'), ['--half'], { encoding: 'utf8' });
    const out = r.stdout + r.stderr;
    expect(out).toContain('[PASS] shim half rounds every operation to binary16');
    expect(out, out).toContain('1 passed, 0 failed');
    expect(r.status).toBe(0);
  });
  for (const [family, gemma] of FAMILIES) {
    it(`${family}: the smallest fixture case, every stage within ${TOL} of HF`, async () => {
      const cases = readJson<{ cases: { name: string; patches: number }[] }>(join(FIXTURES, family, 'cases.json')).cases;
      const smallest = [...cases].sort((a, b) => a.patches - b.patches)[0]!;
      const errs = await towerCase(family, smallest.name, gemma, 'metal-emulated');
      for (const [name, err] of Object.entries(errs)) expect(err, `${family}/${smallest.name} stage ${name}: rel err ${err}`).toBeLessThan(TOL);
    }, 120_000);
    // precisions 'f16' and 'bf16' on the fast-math kernels: the first image HF's bf16 error was measured on, every
    // stage closer to HF fp32 than that (test/metal-half.test.ts holds every image on the IEEE build)
    const hf = readJson<{ cases: Record<string, Record<string, number>> }>(join(FIXTURES, family, 'hf-bf16.json')).cases;
    const [name, bounds] = Object.entries(hf)[0]!;
    for (const precision of ['f16', 'bf16'] as const) {
      it(`${family}/${name} in ${precision}: every stage closer to HF fp32 than HF's own bf16`, async () => {
        const errs = await towerCase(family, name, gemma, 'metal-emulated', precision);
        for (const [stage, bound] of Object.entries(bounds))
          expect(errs[stage]!, `${family}/${name} ${precision} stage ${stage}: ${errs[stage]} (HF's bf16: ${bound})`).toBeLessThan(bound);
      }, 300_000);
    }
  }
});
