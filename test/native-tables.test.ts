// Runs the native table tests (build/native-tests/native_tests, built here on demand from
// test/native/*.cc by tools/native-tests.mjs) once per SIMD level this machine has, so every kernel
// path is checked.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { addon } from '../src/native.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/native-tests.mjs';

const { bin: BIN } = await build({ quiet: true });
const LEVELS = { avx512: ['avx512', 'avx2', 'scalar'], avx2: ['avx2', 'scalar'], neon: ['neon'], scalar: ['scalar'] }[
  addon().simdLevel
] ?? ['scalar'];

describe('native table tests', () => {
  it('the test runner was built', () => {
    expect(existsSync(BIN)).toBe(true);
  });
  for (const level of LEVELS) {
    it(`pass at SIMD level ${level}`, () => {
      const env = { ...process.env };
      if (level !== LEVELS[0]) env['TESSERA_SIMD'] = level;
      const r = spawnSync(BIN, [], { env, encoding: 'utf8', timeout: 240_000 });
      const summary = r.stdout.trim().split('\n').at(-1) ?? '';
      expect(r.status, `${r.stdout.split('\n').filter((l) => l.startsWith('FAIL') || l.startsWith('   ')).join('\n')}\n${r.stderr}`).toBe(0);
      expect(summary).toMatch(/^[1-9]\d* passed, 0 failed$/);
    }, 300_000);
  }
});
