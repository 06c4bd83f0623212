// The MSL emulator itself (tools/mslemu): the self-test binary (shim unit tests, sample kernels under the
// four schedule/poison runs, planted bugs), the lint on the project's kernels and on a file of planted
// lint errors, and out-of-bounds reads caught by the sanitizer build. Needs clang >= 15 (Debian: clang-19);
// without it every test here is skipped and says why.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { build, findClang } from '../tools/mslemu/build.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { lintFile, lintHeaders } from '../tools/mslemu/lint.mjs';
// @ts-expect-error: plain ESM build scripts, no type declarations
import { metalFiles, ROOT } from '../tools/mslemu/prepass.mjs';
// @ts-expect-error: plain ESM build script, no type declarations
import { build as buildNativeTests } from '../scripts/native-tests.mjs';

const status = await build({ asan: false });
const title = status.available ? 'mslemu' : `mslemu (skipped: ${status.reason})`;
if (!status.available) console.warn(`test/metal-emulator.test.ts: skipped: ${status.reason}`);

function sanitizerAvailable(cxx: string): string | null {
  const dir = fs.mkdtempSync(path.join(ROOT, 'build', 'asan-probe-'));
  fs.writeFileSync(path.join(dir, 'p.cpp'), 'int main() { return 0; }\n');
  const r = spawnSync(cxx, ['-fsanitize=address,undefined', path.join(dir, 'p.cpp'), '-o', path.join(dir, 'p')], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  return r.status === 0 ? null : `${cxx} cannot link -fsanitize=address (install libclang-rt-19-dev)`;
}

describe.skipIf(!status.available)(title, () => {
  it('self-test: every shim builtin, sample kernels bit-identical in 4 runs, every planted bug caught', () => {
    const r = spawnSync(path.join(ROOT, 'build/mslemu/selftest'), [], { encoding: 'utf8' });
    const out = r.stdout + r.stderr;
    const m = /(\d+) passed, (\d+) failed/.exec(out);
    expect(m, out).not.toBeNull();
    expect(Number(m![2]), out.split('\n').filter((l) => l.startsWith('[FAIL]')).join('\n')).toBe(0);
    expect(Number(m![1])).toBeGreaterThanOrEqual(100);
    expect(r.status).toBe(0);
    // each planted bug is named with its diagnosis
    for (const bug of ['race_missing_barrier: caught', 'reuse_without_barrier: caught', 'uninit_read: caught: output differs from forward/ff under shuffled:2/55',
      'early_return_barrier: caught', 'divergent_barrier: caught', 'divergent_matrix: caught', 'matrix_after_early_return: caught',
      'constant_too_small: caught', 'unbound_buffer: caught', 'tg_overflow: caught', 'misaligned_buffer: caught'])
      expect(out).toContain(`[PASS] ${bug}`);
  });

  it('a spin-wait is reported by the watchdog, an integer division by zero by the SIGFPE handler', () => {
    const bin = path.join(ROOT, 'build/mslemu/selftest');
    const spin = spawnSync(bin, ['--abort', 'spin_wait'], { encoding: 'utf8', env: { ...process.env, TESSERA_MSLEMU_WATCHDOG_S: '1' }, timeout: 30_000 });
    expect(spin.status).not.toBe(0);
    expect(spin.stderr).toContain('watchdog: no thread reached a barrier or collective for 1 s');
    expect(spin.stderr).toContain('kernel spin_wait');
    expect(spin.stderr).toContain('last sync point tools/mslemu/tests/abort.metal:9');
    const div = spawnSync(bin, ['--abort', 'div_zero'], { encoding: 'utf8', timeout: 30_000 });
    expect(div.status).not.toBe(0);
    expect(div.stderr).toContain('integer division by zero');
    expect(div.stderr).toContain('kernel div_zero, group (0,0,0), thread 0');
  });

  it('lint: every metal/*.metal kernel file is clean', () => {
    const files: string[] = metalFiles();
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const r = lintFile(f, status.cxx);
      expect(r.errors, f).toEqual([]);
    }
  });

  it('lint: no INFINITY, NAN, isinf or isnan anywhere in metal/ (headers too); each planted one reported at its line', () => {
    expect(lintHeaders()).toEqual([]);
    const f = 'tools/mslemu/tests/bad_nonfinite.metal';
    const r = lintFile(f, status.cxx);
    const want = [`${f}:7: 'INFINITY'`, `${f}:8: 'NAN'`, `${f}:9: 'isinf'`, `${f}:9: 'isnan'`];
    for (const w of want) expect(r.errors.some((e: string) => e.startsWith(w)), `${w}\nin\n${r.errors.join('\n')}`).toBe(true);
    expect(r.errors.length).toBe(want.length);  // the mentions in comments are not reported
    // a header that names one is refused too
    const dir = fs.mkdtempSync(path.join(ROOT, 'build', 'lint-h-'));
    fs.writeFileSync(path.join(dir, 'x.h'), '// INFINITY in a comment is fine\ninline float lowest() { return -INFINITY; }\n');
    const h = lintHeaders(dir);
    fs.rmSync(dir, { recursive: true, force: true });
    expect(h.length).toBe(1);
    expect(h[0]).toMatch(/x\.h:2: 'INFINITY': an infinity under fast math/);
  });

  it('lint: the planted address-space and MSL errors are each reported at their line', () => {
    const r = lintFile('tools/mslemu/tests/bad_addrspace.metal', status.cxx);
    expect(r.ok).toBe(false);
    const f = 'tools/mslemu/tests/bad_addrspace.metal';
    const want = [
      `${f}:10:26: error: no matching function for call to 'tg_sum4'`,
      `${f}:5:14: note: candidate function not viable: cannot pass pointer to address space '1' as a pointer to address space '3' in 1st argument`,
      `${f}:12:5: error: no matching function for call to 'write_dev'`,
      `${f}:6:13: note: candidate function not viable: no known conversion from 'float[4]' to 'device float *' for 1st argument`,
      `${f}:13: C-style cast to an address-space pointer type`,
      `${f}:15:15: error: implicit conversion increases floating-point precision`,
      `${f}:15:17: error: implicit conversion loses floating-point precision: 'double' to 'float'`,
      `${f}:17: direct-initialised vector 'float4 v(...)'`,
      `${f}:20: kernel no_space: parameter x needs an address space`,
      `${f}:20: kernel no_space: buffer index 0 used twice`,
      // checked as the Metal 3.0 metallib sees the file, bfloat outside #if defined(__HAVE_BFLOAT__) is unknown
      `${f}:24:37: error: unknown type name 'bfloat'`,
      `${f}:26:24: error: implicit conversion loses floating-point precision: 'float' to 'bfloat'`,
    ];
    for (const w of want) expect(r.errors.some((e: string) => e.startsWith(w)), `${w}\nin\n${r.errors.join('\n')}`).toBe(true);
    expect(r.errors.find((e: string) => e.includes("unknown type name 'bfloat'"))).toMatch(/\[as Metal 3\.0, without bfloat\]$/);
    // nothing else than the planted ones (the direct-init line also gives clang's own error, the unguarded bfloat
    // kernel one per bfloat parameter), each once although every file is type-checked twice
    expect(r.errors.length).toBe(want.length + 2);
  });

  // frames name .metal lines only through llvm-symbolizer (package llvm-19), which needs an absolute path
  const symb = status.available
    ? spawnSync('sh', ['-c', `command -v ${findClang().cxx.replace(/clang\+\+/, 'llvm-symbolizer')} || command -v llvm-symbolizer`], { encoding: 'utf8' }).stdout.trim()
    : '';
  const noAsan = !status.available ? 'no clang'
    : (sanitizerAvailable(status.cxx) ?? (symb ? null : 'no llvm-symbolizer to name .metal lines (Debian: apt-get install llvm-19)'));
  it.skipIf(noAsan !== null)(`out-of-bounds reads are sanitizer reports at the .metal line${noAsan ? ` (skipped: ${noAsan})` : ''}`, async () => {
    await build({ asan: true, quiet: true });
    const bin = path.join(ROOT, 'build/mslemu/asan/selftest');
    const env = { ...process.env, ASAN_OPTIONS: 'detect_leaks=0', UBSAN_OPTIONS: 'print_stacktrace=1', ASAN_SYMBOLIZER_PATH: symb };
    const tg = spawnSync(bin, ['--oob', 'tg_oob'], { encoding: 'utf8', env });
    expect(tg.status).not.toBe(0);
    expect(tg.stderr).toContain('AddressSanitizer: use-after-poison');
    expect(tg.stderr).toContain('tools/mslemu/tests/oob.metal:9');
    const dev = spawnSync(bin, ['--oob', 'dev_oob'], { encoding: 'utf8', env });
    expect(dev.status).not.toBe(0);
    expect(dev.stderr).toContain('AddressSanitizer: heap-buffer-overflow');
    expect(dev.stderr).toContain('tools/mslemu/tests/oob.metal:13');
    // the whole self-test is clean under ASan + UBSan
    const all = spawnSync(bin, [], { encoding: 'utf8', env });
    expect(all.stderr).not.toMatch(/runtime error|AddressSanitizer/);
    expect(all.stdout).toMatch(/ 0 failed/);
    // the project's kernels: every op case of test_metal_ops.cc with the sanitized emulator library loaded
    // into the (uninstrumented) test runner, the ASan runtime preloaded; scratch has exact-size allocations,
    // so one element past a buffer is a report at the .metal line
    const rt = spawnSync(status.cxx, ['-print-file-name=libclang_rt.asan-x86_64.so'], { encoding: 'utf8' }).stdout.trim();
    const { bin: tests } = await buildNativeTests({ quiet: true });
    if (process.arch === 'x64' && fs.existsSync(rt)) {
      const ops = spawnSync(tests, ['metal:'], {
        encoding: 'utf8',
        timeout: 600_000,  // every case in f32 and, where it has activations, again in f16 and bf16 ('metal scratch:' left out)
        env: { ...env, LD_PRELOAD: rt, TESSERA_METAL_OPS: '1', TESSERA_MSLEMU_LIB: path.join(ROOT, 'build/mslemu/asan/libtessera_mslemu.so') },
      });
      expect(ops.stderr, ops.stderr.slice(0, 4000)).not.toMatch(/runtime error|AddressSanitizer/);
      expect(ops.stdout).toMatch(/^[1-9]\d* passed, 0 failed$/m);
    }
    // The first run compiles the ASan emulator and the native tests (minutes on 2 cores beside the other test files).
  }, 900_000);
});
