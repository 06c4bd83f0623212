// native/metal/device.mm, the only Objective-C++ file, checked on Linux (docs/metal-on-linux.md#the-objective-c-file):
//   - type-checked as the Mac builds it (ARC, blocks, -Werror) against tools/fakemetal/stubs, and a file of
//     planted ARC/typing errors must fail with exactly those errors (so the check can fail);
//   - compiled again with manual reference counting on the GNU runtime, run on a fake Metal that executes
//     on the MSL emulator: every op bit-identical to `metal-emulated`, unaligned wraps, GPU errors.
// Needs clang >= 15 (+ libobjc-12-dev, libblocksruntime-dev for the fake); skipped, saying why, without them.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { findClang } from '../tools/mslemu/build.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { ROOT } from '../tools/mslemu/prepass.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { BAD_EXPECTED, checkObjc } from '../tools/fakemetal/check.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { buildSmoke } from '../tools/fakemetal/build.mjs';

const tc = findClang();
const smoke = tc.cxx ? await buildSmoke() : { available: false, reason: tc.reason };
if (!tc.cxx) console.warn(`test/metal-objc.test.ts: skipped: ${tc.reason}`);

describe.skipIf(!tc.cxx)(tc.cxx ? 'device.mm on Linux' : `device.mm on Linux (skipped: ${tc.reason})`, () => {
  it('type-checks under -fobjc-arc -fblocks -Wall -Wextra -Werror against the stubs; bad.mm fails with exactly its 4 errors', () => {
    const r = checkObjc(tc.cxx);
    expect(r.device.output).toBe('');
    expect(r.device.ok).toBe(true);
    expect(r.bad.failed).toBe(true);
    for (const e of BAD_EXPECTED as string[]) expect(r.bad.errors.some((l: string) => l.includes(e)), `${e}\n${r.bad.output}`).toBe(true);
    expect(r.bad.errors.length).toBe(BAD_EXPECTED.length);
  });

  it.skipIf(!smoke.available)(`the MRC build on the fake Metal gives results bit-identical to metal-emulated${smoke.available ? '' : ` (skipped: ${smoke.reason})`}`, () => {
    const r = spawnSync(smoke.bin, [], { encoding: 'utf8', env: { ...process.env, TESSERA_MSLEMU_LIB: path.join(ROOT, 'build/mslemu/libtessera_mslemu.so') } });
    const out = r.stdout + r.stderr;
    expect(r.status, out).toBe(0);
    expect(out).toMatch(/^1[0-9] passed, 0 failed$/m);
    expect(out).toContain('[PASS] linear bf16 (matmul): bit-identical through device.mm');
    expect(out).toContain('[PASS] command-buffer failure -> ERR_GPU');
  }, 170_000);
});
