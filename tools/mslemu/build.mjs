// Builds the MSL emulator with clang (docs/metal-on-linux.md#compilation). Built on demand by the tests that need it (never by
// a user's install); a no-op that says why when no clang >= 15 exists (the addon then reports
// `metal-emulated` as unavailable). Outputs, under build/mslemu/:
//   libtessera_mslemu.so   the runtime + every metal/*.metal kernel + the C API the addon dlopens
//   selftest               the emulator's self-test (shim unit tests, sample kernels, planted bugs)
//   fastmath/libtessera_mslemu.so   the same with every kernel compiled under -ffast-math: the assumptions
//                          Metal's fast math lets its compiler make (no infinities or NaNs, reassociation,
//                          contraction, reciprocals); the op and tower tests run on it too
//   fastmath/selftest      the self-test over test kernels compiled the same way; `--half` runs its half
//                          rounding case (half must round per operation under fast math too)
//   status.json            { available, cxx, reason }
// Options: --asan (also build asan/ variants with -fsanitize=address,undefined), --require (exit 1
// without clang), --quiet.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pool, stale, withLock } from '../../scripts/build-jobs.mjs';
import { ROOT, generate, metalFiles } from './prepass.mjs';

const args = new Set(process.argv.slice(2));

let quiet = args.has('--quiet');
const log = (m) => { if (!quiet) console.log(`mslemu: ${m}`); };
const OUT = path.join(ROOT, 'build', 'mslemu');

export function findClang() {
  const cands = process.env.TESSERA_MSLEMU_CXX ? [process.env.TESSERA_MSLEMU_CXX] : ['clang++-19', 'clang++-16', 'clang++-15', 'clang++-17', 'clang++-18', 'clang++'];
  const tried = [];
  for (const c of cands) {
    const r = spawnSync(c, ['-dumpversion'], { encoding: 'utf8' });
    if (r.error || r.status !== 0) { tried.push(`${c}: not found`); continue; }
    const v = parseInt(r.stdout.trim(), 10);
    const isClang = /clang/.test(spawnSync(c, ['--version'], { encoding: 'utf8' }).stdout || '');
    if (!isClang) { tried.push(`${c}: not clang`); continue; }
    if (v < 15) { tried.push(`${c}: clang ${v} (needs >= 15 for _Float16 on x86-64)`); continue; }
    return { cxx: c, version: v };
  }
  return { cxx: null, reason: `no clang >= 15 (${tried.join('; ')}); install clang-19 (Debian: apt-get install clang-19)` };
}

const HALF = ['-Xclang', '-ffloat16-excess-precision=none'];  // round every half op, as MSL does (docs/metal-on-linux.md#compilation)
const INC = ['-I', path.join(ROOT, 'tools/mslemu/include'), '-I', path.join(ROOT, 'metal'), '-I', path.join(ROOT, 'native')];
const RUN_FLAGS = ['-std=c++17', '-O2', '-fPIC', '-ffp-contract=off', '-Wno-unknown-attributes', ...HALF, ...INC];
const HOST_FLAGS = ['-std=c++17', '-O2', '-fPIC', '-ffp-contract=off', '-Wall', '-Wextra', ...HALF, ...INC];
const ASAN = ['-O1', '-g', '-fno-omit-frame-pointer', '-fsanitize=address,undefined'];
// The fast-math kernels: after RUN_FLAGS, so that it also turns contraction back on (as Metal does).
const FAST_MATH = ['-ffast-math'];
export const FAST_MATH_LIB = path.join(OUT, 'fastmath', 'libtessera_mslemu.so');
export const LINT_FLAGS = ['-std=c++17', '-fsyntax-only', '-DMSLEMU_LINT', '-Werror', '-Wall', '-Werror=double-promotion', '-Werror=implicit-float-conversion',
  '-Wno-unknown-attributes', '-Wno-undefined-inline', '-Wno-unused-function', '-Wno-unused-variable', ...HALF, ...INC];

const INSTRUMENT = path.join(ROOT, 'tools/mslemu/instrument.mjs');
const RUNTIME = ['fiber.cpp', 'scheduler.cpp', 'run.cpp', 'counts.cpp', 'bfloat.cpp'].map((f) => path.join(ROOT, 'tools/mslemu/src', f));
const HEADERS = [
  ...fs.readdirSync(path.join(ROOT, 'tools/mslemu/include')).filter((f) => !fs.statSync(path.join(ROOT, 'tools/mslemu/include', f)).isDirectory()).map((f) => path.join(ROOT, 'tools/mslemu/include', f)),
  ...fs.readdirSync(path.join(ROOT, 'tools/mslemu/include/mslemu')).map((f) => path.join(ROOT, 'tools/mslemu/include/mslemu', f)),
  ...fs.readdirSync(path.join(ROOT, 'tools/mslemu/src')).filter((f) => f.endsWith('.h')).map((f) => path.join(ROOT, 'tools/mslemu/src', f)),
  path.join(ROOT, 'native/metal/mslemu_api.h'),
];

// Prepasses every kernel file of `files` into gen/, returns the .cpp paths.
function prepassAll(files, gendir) {
  fs.mkdirSync(gendir, { recursive: true });
  return files.map((f) => {
    const out = path.join(gendir, path.basename(f).replace(/\.metal$/, '.cpp'));
    const deps = [path.join(ROOT, f), path.join(ROOT, 'tools/mslemu/prepass.mjs'), path.join(ROOT, 'scripts/msl-kernels.mjs')];
    if (stale(out, deps)) fs.writeFileSync(out, generate(fs.readFileSync(path.join(ROOT, f), 'utf8'), f).code);
    return out;
  });
}

export async function build(opts = {}) {
  return withLock(OUT, () => buildUnlocked(opts));
}

async function buildUnlocked({ asan = false, quiet: q = quiet } = {}) {
  quiet = q;
  fs.mkdirSync(OUT, { recursive: true });
  if (process.platform !== 'linux') {
    const reason = `metal-emulated is built on Linux only (${process.platform} runs the real Metal backend, or the CPU)`;
    fs.writeFileSync(path.join(OUT, 'status.json'), JSON.stringify({ available: false, reason }, null, 2));
    return { available: false, reason };
  }
  const tc = findClang();
  if (!tc.cxx) {
    fs.writeFileSync(path.join(OUT, 'status.json'), JSON.stringify({ available: false, reason: tc.reason }, null, 2));
    return { available: false, reason: tc.reason };
  }
  const { cxx } = tc;
  const kernelFiles = metalFiles();
  const testFiles = fs.readdirSync(path.join(ROOT, 'tools/mslemu/tests')).filter((f) => f.endsWith('.metal') && !f.startsWith('bad_')).map((f) => path.join('tools/mslemu/tests', f));
  const metalHeaders = fs.readdirSync(path.join(ROOT, 'metal/shared')).map((f) => path.join(ROOT, 'metal/shared', f))
    .concat(fs.readdirSync(path.join(ROOT, 'metal')).filter((f) => f.endsWith('.h')).map((f) => path.join(ROOT, 'metal', f)));
  // kernelsOnly: the variant differs in its kernels only; it links the first variant's runtime.
  const variants = [{ dir: OUT, extra: [] }, { dir: path.dirname(FAST_MATH_LIB), extra: FAST_MATH, kernelsOnly: true }];
  if (asan) variants.push({ dir: path.join(OUT, 'asan'), extra: ASAN });
  const jobs = [];
  const objs = {};
  for (const v of variants) {
    const objdir = path.join(v.dir, 'obj');
    fs.mkdirSync(objdir, { recursive: true });
    const kcpp = prepassAll(kernelFiles, path.join(OUT, 'gen'));
    const tcpp = prepassAll(testFiles, path.join(OUT, 'gen-tests'));
    const o = { kernels: [], tests: {}, runtime: [], capi: null, selftest: null };
    const add = (src, flags, deps) => {
      const obj = path.join(objdir, path.basename(path.dirname(src)) + '_' + path.basename(src).replace(/\.\w+$/, '.o'));
      if (stale(obj, [src, ...deps])) jobs.push({ cmd: cxx, args: [...flags, ...v.extra, '-c', src, '-o', obj], what: `compile ${path.relative(ROOT, src)}` });
      return obj;
    };
    // The product's kernels, counted (docs/metal-on-linux.md#counters): optimised IR (in the sanitizer
    // variant already instrumented by the sanitizers), counted, then compiled.
    const addCounted = (src, deps) => {
      const obj = path.join(objdir, path.basename(path.dirname(src)) + '_' + path.basename(src).replace(/\.\w+$/, '.o'));
      const ll = obj.replace(/\.o$/, '.ll'), ill = obj.replace(/\.o$/, '.counted.ll');
      if (stale(obj, [src, INSTRUMENT, ...deps])) {
        const q = (a) => a.map((x) => `'${x}'`).join(' ');
        jobs.push({ cmd: 'sh', args: ['-c', `${q([cxx, ...RUN_FLAGS, ...v.extra, '-S', '-emit-llvm', src, '-o', ll])} && ${q([process.execPath, INSTRUMENT, ll, ill])} && ${q([cxx, ...(v.extra.length ? ['-O1', '-g'] : ['-O2']), '-fPIC', '-Wno-override-module', '-c', ill, '-o', obj])}`],
          what: `compile ${path.relative(ROOT, src)} (counted)` });
      }
      return obj;
    };
    for (const c of kcpp) o.kernels.push(addCounted(c, [...HEADERS, ...metalHeaders]));
    for (const c of tcpp) o.tests[path.basename(c, '.cpp')] = add(c, RUN_FLAGS, [...HEADERS, ...metalHeaders]);
    if (v.kernelsOnly) { objs[v.dir] = { ...objs[OUT], kernels: o.kernels, tests: o.tests, kernelsOnly: true }; continue; }
    for (const c of RUNTIME) o.runtime.push(add(c, HOST_FLAGS, HEADERS));
    o.capi = add(path.join(ROOT, 'tools/mslemu/src/capi.cpp'), HOST_FLAGS, HEADERS);
    o.selftest = add(path.join(ROOT, 'tools/mslemu/tests/selftest.cpp'), HOST_FLAGS, HEADERS);
    objs[v.dir] = o;
  }
  log(`${cxx}: ${jobs.length} file(s) to compile`);
  await pool(jobs, Math.max(1, Math.min(os.cpus().length, 4)));
  const links = [];
  for (const v of variants) {
    const o = objs[v.dir];
    const lib = path.join(v.dir, 'libtessera_mslemu.so');
    const libIn = [...o.runtime, o.capi, ...o.kernels];
    if (stale(lib, libIn)) links.push({ cmd: cxx, args: ['-shared', ...(o.kernelsOnly ? [] : v.extra), '-o', lib, ...libIn, '-lpthread'], what: `link ${path.relative(OUT, lib)}` });
    const st = path.join(v.dir, 'selftest');
    const stIn = [...o.runtime, o.selftest, ...Object.values(o.tests)];
    if (stale(st, stIn)) links.push({ cmd: cxx, args: [...(o.kernelsOnly ? [] : v.extra), '-o', st, ...stIn, '-lpthread'], what: `link ${path.relative(OUT, st)}` });
  }
  await pool(links, 2);
  const status = { available: true, cxx, version: tc.version, lib: path.join(OUT, 'libtessera_mslemu.so'), fastMathLib: FAST_MATH_LIB, kernels: kernelFiles };
  fs.writeFileSync(path.join(OUT, 'status.json'), JSON.stringify(status, null, 2));
  return status;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  build({ asan: args.has('--asan') }).then((s) => {
    if (!s.available) {
      log(`skipped: ${s.reason}`);
      process.exit(args.has('--require') ? 1 : 0);
    }
    log(`built ${path.relative(ROOT, s.lib)} (${s.kernels.length} kernel files)`);
  }, (e) => {
    console.error(`mslemu: build failed\n${e.message}`);
    process.exit(1);
  });
}
