// The Windows x64 build under Wine, with the official Windows node.exe (test/helpers/wine.ts):
// - the native table tests (test/native/, cross-built by scripts/win32.mjs as native_tests.exe) at every SIMD
//   level this CPU has, as test/native-tables.test.ts runs them on Linux;
// - the win32 addon (the one prebuilds/win32-x64/ ships) loaded by node.exe and by a renamed copy of it (as
//   electron.exe loads it: the delay-load hook binds Node-API to whichever executable loaded the addon),
//   reporting the same SIMD levels as the Linux addon.
// The tarball installed on "Windows" (npm run by node.exe, sharp's win32 binary, the fixture towers of
// every family against HF, the library and the CLI) is in test/package-install.test.ts, which packs it.
// Skipped, naming the Debian packages, where wine or the MinGW cross compiler is missing.
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addon } from '../src/native.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../scripts/win32.mjs';
import { nodeExe, runWine, winePrefix, wineMissing, winPath } from './helpers/wine.js';

const missing = wineMissing();
if (missing) console.warn(`skipped: the Windows build under Wine: ${missing}`);

// The ladder below this machine's best level (native/common/cpu_features.h), as native-tables.test.ts has it.
const LADDERS: Record<string, string[]> = {
  amx: ['amx', 'avx512-bf16', 'avx512', 'avx2', 'scalar'],
  'avx512-bf16': ['avx512-bf16', 'avx512', 'avx2', 'scalar'],
  avx512: ['avx512', 'avx2', 'scalar'],
  avx2: ['avx2', 'scalar'],
  scalar: ['scalar'],
};

describe.skipIf(missing)('Windows x64 under Wine', () => {
  let tests: string, lib: string, node: string, work: string;
  beforeAll(async () => {
    // The cross builds (incremental) and node.exe with its prefix.
    tests = ((await build({ target: 'tests', quiet: true })) as { file: string }).file;
    lib = ((await build({ target: 'addon', quiet: true })) as { file: string }).file;
    node = nodeExe();
    winePrefix();
    work = mkdtempSync(join(tmpdir(), 'tessera-win32-'));
  }, 1_200_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const levels = () => LADDERS[addon().bf16Level !== 'none' ? addon().bf16Level : addon().simdLevel] ?? ['scalar'];

  it('the native table tests pass at every SIMD level this CPU has', () => {
    for (const level of levels()) {
      const t0 = performance.now();
      const r = runWine(tests, [], { env: level === levels()[0] ? {} : { TESSERA_SIMD: level } });
      const summary = r.stdout.trim().split('\n').at(-1) ?? '';
      const failures = r.stdout.split('\n').filter((l) => l.startsWith('FAIL') || l.startsWith('   ')).join('\n');
      expect(r.code, `${level}:\n${failures}\n${r.stderr}`).toBe(0);
      expect(summary, level).toMatch(/^[1-9]\d* passed, 0 failed$/);
      console.log(`native_tests.exe under Wine at ${level}: ${summary} (${((performance.now() - t0) / 1000).toFixed(1)} s)`);
    }
  }, 1_200_000);

  it('node.exe loads the addon, and so does a renamed node.exe (the delay-load hook): the same CPU levels as on Linux', () => {
    const script = join(work, 'load.cjs');
    writeFileSync(script, `const m = { exports: {} };
process.dlopen(m, process.argv[2]);
const a = m.exports;
console.log(JSON.stringify({ simd: a.simdLevel, bf16: a.bf16Level, widen: a.bf16Widening, codes: a.errorCodes.length }));
`);
    const renamed = join(work, 'my-electron-app.exe');
    copyFileSync(node, renamed);
    const want = { simd: addon().simdLevel, bf16: addon().bf16Level, widen: addon().bf16Widening, codes: addon().errorCodes.length };
    for (const exe of [node, renamed]) {
      const r = runWine(exe, [winPath(script), winPath(lib)]);
      expect(r.stderr, exe).toBe('');
      expect(r.code, exe).toBe(0);
      expect(JSON.parse(r.stdout), exe).toEqual(want);
    }
    expect(existsSync(renamed)).toBe(true);
  }, 300_000);
});
