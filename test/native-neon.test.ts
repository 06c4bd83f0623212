// The arm64 NEON kernels (native/cpu/kernels_neon.cc, the CPU path on Apple Silicon) checked on an
// x86-64 host: the native table tests are cross-compiled for aarch64 Linux
// (scripts/native-tests.mjs) and run under qemu user mode, where each_level runs every
// CPU op at scalar and at neon, and (qemu's `max` CPU has FEAT_BF16) the bf16 tests run the BFMMLA
// GEMM of precision 'bf16' at neon-bf16. This shows the NEON code computes the right numbers; it says
// nothing about its speed on real Apple Silicon (qemu translates every instruction).
// Skipped, saying why, without the cross compiler or qemu, and on arm64 hosts, where
// test/native-tables.test.ts already runs the NEON kernels natively.
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build script, no type declarations
import { build, findCrossCxx, findQemu } from '../scripts/native-tests.mjs';

function skipReason(): string | null {
  if (process.arch === 'arm64') return 'this host is arm64: test/native-tables.test.ts runs the NEON kernels natively';
  const cxx = findCrossCxx();
  if (!cxx.cxx) return cxx.reason;
  const qemu = findQemu();
  if (!qemu.qemu) return qemu.reason;
  return null;
}

const skip = skipReason();
if (skip) console.warn(`test/native-neon.test.ts: skipped: ${skip}`);

describe.skipIf(skip !== null)(skip ? `NEON kernels under qemu (skipped: ${skip})` : 'NEON kernels under qemu', () => {
  let run: { status: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    const built = await build({ target: 'aarch64', quiet: true });
    if (built.skip) throw new Error(`the aarch64 build skipped although the tools were found: ${built.skip}`);
    // The best level must run, not a lowered one; qemu's `max` CPU has FEAT_BF16, so the BFMMLA GEMM
    // (neon-bf16) runs too, and the runner fails unless it finds it (TESSERA_REQUIRE_BF16).
    const env = { ...process.env, QEMU_CPU: 'max', TESSERA_REQUIRE_BF16: '1' };
    delete env['TESSERA_SIMD'];
    const r = spawnSync(built.qemu, [built.bin], { env, encoding: 'utf8', timeout: 240_000 });
    run = { status: r.status, stdout: r.stdout ?? '', stderr: `${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
  }, 600_000);

  it('every native table test passes on aarch64', () => {
    const failures = run.stdout.split('\n').filter((l) => l.startsWith('FAIL') || l.startsWith('   ')).join('\n');
    expect(run.status, `${failures}\n${run.stderr}`).toBe(0);
    expect(run.stdout.trim().split('\n').at(-1)).toMatch(/^[1-9]\d* passed, 0 failed$/);
  });

  it('the NEON kernels ran: the aarch64 build has the neon table and it is the best level', () => {
    expect(run.stdout).toMatch(/^ok {3}cpu: arm64 build runs the neon kernels/m);
  });

  it('the BFMMLA kernels ran: FEAT_BF16 was detected, so the bf16 table tests and bf16 towers ran at neon-bf16', () => {
    expect(run.stdout).toMatch(/^ok {3}cpu: arm64 build detects FEAT_BF16 and has the neon-bf16 table/m);
    expect(run.stdout).toMatch(/^ok {3}cpu bf16: each bf16 level's linear is its instruction's scalar reference/m);
    expect(run.stdout).toMatch(/neon-bf16 qwen: bf16 vs f32, stage/);
  });
});
