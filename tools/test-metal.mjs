#!/usr/bin/env node
// `npm run test:metal` (docs/metal-on-linux.md#what-only-macos-shows): what only a Mac can show. macOS arm64 only.
//   1. toolchain: the SDK and Apple's Metal compiler (Xcode 26 ships it as a separate component)
//   2. offline compile of exactly what ships (build/metal/src/*.metal, includes inlined) with
//      `xcrun metal -std=metal3.0 -Wall -Werror`, then one metallib
//   3. device.mm against the REAL SDK headers: -fobjc-arc -fblocks -Wall -Wextra -Werror -fsyntax-only
//      (the Linux check uses hand-written stubs; this is where a wrong stub shows)
//   4. the addon built (ARC, frameworks Metal + Foundation), then with MTL_DEBUG_LAYER=1 and
//      MTL_SHADER_VALIDATION=1: every kernel compiled at run time into a pipeline, every op vs the CPU
//      backend within 5e-3 and bit-identical run to run, the fixture towers end to end within 5e-3 of HF
//      (test/metal-ops.test.ts with TESSERA_TEST_METAL=1)
//   5. the synthetic Qwen3.5 tower at 1024x1024 timed on this GPU (median of 3 after a warm-up), printed beside
//      the cost model's estimate for this chip (BENCHMARKS.md, metal-model piece): the first Mac run calibrates
//      the model. Reported, never asserted (timing is not a test).
//   6. build/metal/report.json, and "N passed, N failed, N skipped"
// Performance beyond that one figure is `npm run bench -- --backend metal`.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { METAL_COMPILE } from '../scripts/msl-kernels.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const results = [];
const record = (name, status, detail = '') => {
  results.push({ name, status, detail });
  console.log(`${status.padEnd(7)} ${name}${detail ? `: ${detail}` : ''}`);
};
const run = (cmd, args, opts = {}) => spawnSync(cmd, args, { encoding: 'utf8', cwd: ROOT, ...opts });

if (process.platform !== 'darwin' || process.arch !== 'arm64') {
  console.error(`test:metal needs macOS on Apple silicon (this is ${process.platform}/${process.arch}). On Linux, npm test checks the Metal backend on the MSL emulator (docs/metal.md).`);
  process.exit(1);
}

// 1. toolchain
const sdk = run('xcrun', ['-sdk', 'macosx', '--show-sdk-version']);
record('macOS SDK', sdk.status === 0 ? 'PASS' : 'FAIL', (sdk.stdout || sdk.stderr).trim());
const metalVersion = run('xcrun', ['-sdk', 'macosx', 'metal', '--version']);
const metalOut = (metalVersion.stdout || '') + (metalVersion.stderr || '');
let haveCompiler = metalVersion.status === 0;
if (!haveCompiler && /toolchain|MetalToolchain|not found|unable to find utility/i.test(metalOut)) {
  record('Metal compiler', 'SKIPPED', 'missing: run `xcodebuild -downloadComponent MetalToolchain` (Xcode 26+)');
} else record('Metal compiler', haveCompiler ? 'PASS' : 'FAIL', metalOut.split('\n')[0] ?? '');

// the addon first: node-gyp rebuild starts by deleting build/ (it also regenerates build/metal)
const gyp = run('npx', ['node-gyp', 'rebuild', '-j', '4'], { stdio: 'inherit' });
record('addon build (ARC, Metal + Foundation)', gyp.status === 0 ? 'PASS' : 'FAIL');

// 2. offline compile of what ships
const gen = run('node', ['scripts/msl-kernels.mjs', 'headers']);
const srcDir = path.join(ROOT, 'build/metal/src');
const airDir = path.join(ROOT, 'build/metal/air');
fs.mkdirSync(airDir, { recursive: true });
const kernels = gen.status === 0 ? fs.readdirSync(srcDir).filter((f) => f.endsWith('.metal')) : [];
if (!kernels.length) record('kernel sources', 'FAIL', 'scripts/msl-kernels.mjs headers wrote no build/metal/src/*.metal');
for (const f of kernels) {
  if (!haveCompiler) { record(`xcrun metal ${f}`, 'SKIPPED', 'no Metal compiler'); continue; }
  const r = run('xcrun', [...METAL_COMPILE, '-c', path.join(srcDir, f), '-o', path.join(airDir, f.replace(/\.metal$/, '.air'))]);
  record(`xcrun metal -Werror ${f}`, r.status === 0 ? 'PASS' : 'FAIL', r.status === 0 ? '' : (r.stderr || r.stdout).trim());
}
if (haveCompiler && kernels.length) {
  const airs = fs.readdirSync(airDir).filter((f) => f.endsWith('.air')).map((f) => path.join(airDir, f));
  const r = run('xcrun', ['-sdk', 'macosx', 'metallib', ...airs, '-o', path.join(ROOT, 'build/metal/tessera.metallib')]);
  record('xcrun metallib', r.status === 0 ? 'PASS' : 'FAIL', (r.stderr || '').trim());
}

// 3. device.mm against the real SDK
const sdkPath = run('xcrun', ['-sdk', 'macosx', '--show-sdk-path']).stdout.trim();
const objc = run('xcrun', ['clang++', '-x', 'objective-c++', '-std=c++17', '-isysroot', sdkPath, '-mmacosx-version-min=13.0', '-fobjc-arc', '-fblocks',
  '-fsyntax-only', '-Wall', '-Wextra', '-Werror', '-DTESSERA_HAVE_METAL=1', '-I', 'native', '-I', 'build/metal', 'native/metal/device.mm']);
record('device.mm vs the real SDK (ARC, -Werror)', objc.status === 0 ? 'PASS' : 'FAIL', (objc.stderr || '').trim());

// 4. addon + GPU parity
let vitest = { numPassedTests: 0, numFailedTests: 0, numPendingTests: 0, testResults: [] };
if (gyp.status === 0) {
  const reportFile = path.join(ROOT, 'build/metal/vitest.json');
  const env = { ...process.env, TESSERA_TEST_METAL: '1', MTL_DEBUG_LAYER: '1', MTL_SHADER_VALIDATION: '1' };
  run('npx', ['vitest', 'run', 'test/metal-ops.test.ts', '--reporter=verbose', '--reporter=json', `--outputFile.json=${reportFile}`], { env, stdio: 'inherit' });
  try { vitest = JSON.parse(fs.readFileSync(reportFile, 'utf8')); } catch { record('GPU parity tests', 'FAIL', 'vitest wrote no report'); }
  for (const file of vitest.testResults ?? [])
    for (const t of file.assertionResults ?? [])
      if (/GPU|metal on the GPU/.test(t.ancestorTitles?.join(' ') ?? '')) record(t.title, t.status === 'passed' ? 'PASS' : t.status === 'pending' || t.status === 'skipped' ? 'SKIPPED' : 'FAIL', (t.failureMessages ?? []).join('\n').slice(0, 2000));
}

// 5. the tower on the GPU beside the model
const model = modelEstimates();
if (gyp.status === 0) {
  const chip = gpuName();
  const tsc = run('npx', ['tsc', '-p', 'tsconfig.json']);
  if (tsc.status !== 0) record('tower timing', 'FAIL', `tsc: ${(tsc.stdout + tsc.stderr).trim()}`);
  else {
    const { makeSyntheticQwen } = await import('../bench/make-synthetic-qwen.mjs');
    const { runQwen } = await import('../bench/pieces/qwen-tower.mjs');
    process.env['TESSERA_BENCH_BACKEND'] = 'metal';
    try {
      const r = runQwen({ model: makeSyntheticQwen(), h: 64, w: 64, runs: 3 });
      const est = model?.['qwen3_5 1024x1024']?.[chip.model];
      const beside = est === undefined
        ? `no model figure for ${chip.model} (BENCHMARKS.md's metal-model piece has ${Object.keys(model?.['qwen3_5 1024x1024'] ?? {}).join(', ') || 'none'})`
        : `model ${est.toFixed(3)} s for ${chip.model}${chip.cores ? ` (this GPU: ${chip.cores} cores)` : ''}, measured / model = ${(r.ms / 1000 / est).toFixed(2)}`;
      record('qwen3_5 1024x1024 on this GPU', 'PASS', `measured ${(r.ms / 1000).toFixed(3)} s (median of 3); ${beside}`);
      console.log(`test:metal: qwen3_5 1024x1024 on ${chip.model}: measured ${(r.ms / 1000).toFixed(3)} s, ${beside}`);
    } catch (e) {
      record('qwen3_5 1024x1024 on this GPU', 'FAIL', String(e.message ?? e).slice(0, 2000));
    }
  }
}

// The cost model's estimates, from the machine-readable line the metal-model bench piece writes into BENCHMARKS.md.
function modelEstimates() {
  try {
    const m = /<!-- metal-model-estimates: (\{.*\}) -->/.exec(fs.readFileSync(path.join(ROOT, 'BENCHMARKS.md'), 'utf8'));
    return m ? JSON.parse(m[1]) : null;
  } catch {
    return null;
  }
}
// "M4 Max" and the GPU core count of this Mac (sysctl and system_profiler).
function gpuName() {
  const brand = run('sysctl', ['-n', 'machdep.cpu.brand_string']).stdout.trim();  // "Apple M4 Max"
  const sp = run('system_profiler', ['SPDisplaysDataType']).stdout;
  const cores = /Total Number of Cores:\s*(\d+)/.exec(sp)?.[1];
  return { model: brand.replace(/^Apple\s+/, ''), cores: cores ? Number(cores) : null };
}

// 6. report
const count = (s) => results.filter((r) => r.status === s).length;
const report = { date: new Date().toISOString(), sdk: sdk.stdout.trim(), metal: metalOut.split('\n')[0], results };
fs.mkdirSync(path.join(ROOT, 'build/metal'), { recursive: true });
fs.writeFileSync(path.join(ROOT, 'build/metal/report.json'), JSON.stringify(report, null, 2));
console.log(`${count('PASS')} passed, ${count('FAIL')} failed${count('SKIPPED') ? `, ${count('SKIPPED')} skipped` : ''}`);
process.exit(count('FAIL') ? 1 : 0);
