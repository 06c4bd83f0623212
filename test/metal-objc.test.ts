// native/metal/device.mm, the only Objective-C++ file, checked on Linux (docs/metal-on-linux.md#the-objective-c-file):
//   - type-checked as the Mac builds it (ARC, blocks, -Werror) against tools/fakemetal/stubs shaped like the
//     macOS 13, 14 (no mathMode) and 15 SDKs, and a file of planted ARC/typing errors must fail with exactly
//     those errors (so the check can fail);
//   - compiled again with manual reference counting on the GNU runtime, run on a fake Metal that executes
//     on the MSL emulator: every op bit-identical to `metal-emulated`, unaligned wraps, GPU errors; the
//     capability check refusing an Apple5 paravirtual device and accepting an Apple7 one; a tessera.metallib
//     of the same sources loaded instead of compiling the sources, a stale one ignored.
// Needs clang >= 15 (+ libobjc-12-dev, libblocksruntime-dev for the fake); skipped, saying why, without them.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { findClang } from '../tools/mslemu/build.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { ROOT } from '../tools/mslemu/prepass.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { BAD_EXPECTED, checkObjc, SDKS } from '../tools/fakemetal/check.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { buildSmoke } from '../tools/fakemetal/build.mjs';

const tc = findClang();
const smoke = tc.cxx ? await buildSmoke() : { available: false, reason: tc.reason };
if (!tc.cxx) console.warn(`test/metal-objc.test.ts: skipped: ${tc.reason}`);

describe.skipIf(!tc.cxx)(tc.cxx ? 'device.mm on Linux' : `device.mm on Linux (skipped: ${tc.reason})`, () => {
  it('type-checks under -fobjc-arc -fblocks -Wall -Wextra -Werror against stubs shaped like the macOS 13, 14 and 15 SDKs; bad.mm fails with exactly its 4 errors', () => {
    const r = checkObjc(tc.cxx);
    expect(r.sdks.map((d: { sdk: number }) => d.sdk)).toEqual(SDKS);
    expect(SDKS).toEqual(expect.arrayContaining([140000, 150000]));
    for (const d of r.sdks as { sdk: number; ok: boolean; output: string }[]) {
      expect(d.output, `SDK ${d.sdk}`).toBe('');
      expect(d.ok, `SDK ${d.sdk}`).toBe(true);
    }
    expect(r.bad.failed).toBe(true);
    for (const e of BAD_EXPECTED as string[]) expect(r.bad.errors.some((l: string) => l.includes(e)), `${e}\n${r.bad.output}`).toBe(true);
    expect(r.bad.errors.length).toBe(BAD_EXPECTED.length);
  });

  it.skipIf(!smoke.available)(`the MRC build on the fake Metal gives results bit-identical to metal-emulated${smoke.available ? '' : ` (skipped: ${smoke.reason})`}`, () => {
    const r = spawnSync(smoke.bin, [], { encoding: 'utf8', env: { ...process.env, TESSERA_MSLEMU_LIB: path.join(ROOT, 'build/mslemu/libtessera_mslemu.so') } });
    const out = r.stdout + r.stderr;
    expect(r.status, out).toBe(0);
    expect(out).toMatch(/^41 passed, 0 failed$/m);
    expect(out).toContain('[PASS] linear bf16 (matmul): bit-identical through device.mm');
    // precisions 'f16' and 'bf16': the half and bfloat kernels through device.mm
    expect(out).toContain('[PASS] linear bf16 (matmul) [f16]: bit-identical through device.mm');
    expect(out).toContain('[PASS] rope (2 sections; k with a head norm) + attention (2 segments) [f16]: bit-identical through device.mm');
    expect(out).toContain('[PASS] linear bf16 (matmul) [bf16]: bit-identical through device.mm');
    expect(out).toContain('[PASS] rope (2 sections; k with a head norm) + attention (2 segments) [bf16]: bit-identical through device.mm');
    expect(out).toContain('[PASS] command-buffer failure -> ERR_GPU');
    expect(out).toContain("[PASS] Apple5 paravirtual device -> ERR_BACKEND_UNAVAILABLE naming it and what it lacks: ERR_BACKEND_UNAVAILABLE: backend 'metal': the GPU 'Apple Paravirtual device' (family Apple5)");
    expect(out).toContain('[PASS] Apple7 with 16 KiB of threadgroup memory -> ERR_BACKEND_UNAVAILABLE');
    expect(out).toContain('[PASS] Apple7 device: accepted, reported as family Apple7');
    expect(out).toContain('[PASS] tessera.metallib of these sources: loaded, no source compile');
    expect(out).toContain('[PASS] tessera.metallib of other sources (stale stamp): ignored, sources compiled');
  }, 170_000);
});
