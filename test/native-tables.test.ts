// Runs the native table tests (build/native-tests/native_tests, built here on demand from
// test/native/*.cc by scripts/native-tests.mjs) once per SIMD level this machine has, so every kernel
// path is checked.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { addon } from '../src/native.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../scripts/native-tests.mjs';

// build() throws when the runner does not build: the file then fails before any test.
const { bin: BIN } = await build({ quiet: true });
// The ladder below this machine's best level, its bf16 level where it has one (native/common/cpu_features.h).
const LADDERS: Record<string, string[]> = {
  amx: ['amx', 'avx512-bf16', 'avx512', 'avx2', 'scalar'],
  'avx512-bf16': ['avx512-bf16', 'avx512', 'avx2', 'scalar'],
  avx512: ['avx512', 'avx2', 'scalar'],
  avx2: ['avx2', 'scalar'],
  'neon-bf16': ['neon-bf16', 'neon'],
  neon: ['neon'],
  scalar: ['scalar'],
};
const LEVELS = LADDERS[addon().bf16Level !== 'none' ? addon().bf16Level : addon().simdLevel] ?? ['scalar'];
// One run per level (TESSERA_SIMD holds the ladder there: the fallback of precision bf16 included), and on x86 with AVX2 one more with the AVX2
// table this CPU's vendor does not choose (TESSERA_BF16_WIDEN: the bf16 weight layout for Intel's
// ports or for AMD's), so both AVX2 GEMM tables are checked on any x86 machine.
const RUNS: { name: string; env: Record<string, string> }[] = LEVELS.map((level) => ({
  name: `SIMD level ${level}`,
  env: level === LEVELS[0] ? {} : { TESSERA_SIMD: level },
}));
if (LEVELS.includes('avx2')) {
  const other = addon().bf16Widening === 'unpack' ? 'shift' : 'unpack';
  const env = { TESSERA_SIMD: 'avx2', TESSERA_BF16_WIDEN: other };
  RUNS.push({ name: `SIMD level avx2, bf16 widened by ${other}`, env });
}

describe('native table tests', () => {
  for (const run of RUNS) {
    it(`pass at ${run.name}`, () => {
      const r = spawnSync(BIN, [], { env: { ...process.env, ...run.env }, encoding: 'utf8', timeout: 240_000 });
      const summary = r.stdout.trim().split('\n').at(-1) ?? '';
      expect(r.status, `${r.stdout.split('\n').filter((l) => l.startsWith('FAIL') || l.startsWith('   ')).join('\n')}\n${r.stderr}`).toBe(0);
      expect(summary).toMatch(/^[1-9]\d* passed, 0 failed$/);
    }, 300_000);
  }
});
