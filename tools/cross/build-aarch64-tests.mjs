// Builds the native table tests (test/native/*.cc + native/) for arm64 Linux with a cross compiler,
// so that CI on x86-64 runs the NEON kernels (native/cpu/kernels_neon.cc) under qemu user mode
// (test/native-neon.test.ts). Output, under build/aarch64/:
//   obj/<source path>.o   one object per source, rebuilt only when stale
//   native_tests          the statically linked runner (static: qemu then needs no arm64 sysroot)
// build() returns { bin, qemu } (qemu: the emulator to run it with), or { skip: reason } when the
// cross compiler or qemu is missing (users never need either; the reason names the Debian packages).
// As a script: `node tools/cross/build-aarch64-tests.mjs [--quiet]` builds and prints what it did
// (exit 0 also when skipped, saying why; exit 1 when a compile or the link fails).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeSources } from '../../scripts/gyp-sources.mjs';
import { pool, stale } from '../build-jobs.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUT = path.join(ROOT, 'build', 'aarch64');
const SELF = fileURLToPath(import.meta.url);

let quiet = process.argv.includes('--quiet');
const log = (m) => { if (!quiet) console.log(`aarch64: ${m}`); };

// The flags binding.gyp gives native_tests (the build on a Mac is this one, natively).
const FLAGS = ['-std=c++20', '-O3', '-fexceptions', '-ffp-contract=off', '-Wall', '-Wextra', '-Wno-unused-parameter',
  '-I', path.join(ROOT, 'native'), '-I', path.join(ROOT, 'test', 'native')];

const PACKAGES = 'Debian: apt-get install g++-aarch64-linux-gnu qemu-user';

const runs = (cmd, args) => {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.error || r.status !== 0 ? null : r.stdout.trim();
};

// $TESSERA_AARCH64_CXX, else Debian's cross g++; it must target aarch64 (checked with -dumpmachine).
export function findCrossCxx() {
  const cxx = process.env.TESSERA_AARCH64_CXX || 'aarch64-linux-gnu-g++';
  const machine = runs(cxx, ['-dumpmachine']);
  if (machine === null) return { cxx: null, reason: `no arm64 cross compiler (${cxx}: not found; ${PACKAGES}, or set TESSERA_AARCH64_CXX)` };
  if (!machine.startsWith('aarch64')) return { cxx: null, reason: `${cxx} targets ${machine}, not aarch64` };
  return { cxx };
}

export function findQemu() {
  for (const q of ['qemu-aarch64', 'qemu-aarch64-static']) if (runs(q, ['--version']) !== null) return { qemu: q };
  return { qemu: null, reason: `no qemu user mode for arm64 (qemu-aarch64, qemu-aarch64-static: not found; ${PACKAGES})` };
}

// Every native/ source but the Metal backend (native/metal/), and test/native/ but test_metal_*.cc:
// those compile the MSL emulator's generated kernel headers (tools/mslemu/prepass.mjs) and run them
// through the host's build/mslemu/ library, which is an x86-64 build; the Metal path has nothing
// arm64-specific to check here (its kernels are MSL, checked by the emulator tests on the host).
export function aarch64TestSources() {
  return nativeSources({ tests: true }).filter((f) => !f.startsWith(path.join('native', 'metal') + path.sep) && !/(^|\/)test_metal[^/]*\.cc$/.test(f));
}


// Every header a source could include: any .h/.inc under native/ or test/native/ newer than an
// object rebuilds it (simpler than parsing includes, and never misses one).
function headers() {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(h|inc)$/.test(e.name)) out.push(p);
    }
  };
  walk(path.join(ROOT, 'native'));
  walk(path.join(ROOT, 'test', 'native'));
  return out;
}

// The compiler and flags in one file, rewritten only when they change: a different
// TESSERA_AARCH64_CXX or flag set makes every object stale.
function commandStamp(cxx) {
  const stamp = path.join(OUT, 'command.txt');
  const text = [cxx, ...FLAGS].join(' ') + '\n';
  let old = null;
  try { old = fs.readFileSync(stamp, 'utf8'); } catch { /* first build */ }
  if (old !== text) fs.writeFileSync(stamp, text);
  return stamp;
}

export async function build({ quiet: q = quiet } = {}) {
  quiet = q;
  const tc = findCrossCxx();
  if (!tc.cxx) return { skip: tc.reason };
  const qm = findQemu();
  if (!qm.qemu) return { skip: qm.reason };
  fs.mkdirSync(OUT, { recursive: true });
  const deps = [...headers(), SELF, commandStamp(tc.cxx)];
  const objs = [];
  const jobs = [];
  for (const src of aarch64TestSources()) {
    const obj = path.join(OUT, 'obj', src.replace(/\.cc$/, '.o'));
    objs.push(obj);
    if (!stale(obj, [path.join(ROOT, src), ...deps])) continue;
    fs.mkdirSync(path.dirname(obj), { recursive: true });
    // Written under a temporary name and renamed when complete: a killed compile never leaves an
    // object that looks up to date.
    const tmp = `${obj}.tmp`;
    jobs.push({ cmd: tc.cxx, args: [...FLAGS, '-c', path.join(ROOT, src), '-o', tmp], what: `compile ${src}`, done: () => fs.renameSync(tmp, obj) });
  }
  const jobsN = os.availableParallelism();
  log(`${tc.cxx}: ${jobs.length} of ${objs.length} object(s) to compile, ${jobsN} at a time`);
  await pool(jobs, jobsN, log);
  const bin = path.join(OUT, 'native_tests');
  if (stale(bin, objs)) {
    const tmp = `${bin}.tmp`;
    await pool([{ cmd: tc.cxx, args: ['-static', '-o', tmp, ...objs, '-lpthread'], what: 'link native_tests', done: () => fs.renameSync(tmp, bin) }], 1, log);
    log(`linked ${path.relative(ROOT, bin)} (static)`);
  } else {
    log(`${path.relative(ROOT, bin)} is up to date`);
  }
  return { bin, qemu: qm.qemu };
}

if (process.argv[1] && path.resolve(process.argv[1]) === SELF) {
  build().then((r) => {
    if (r.skip) log(`skipped: ${r.skip}`);
    else log(`run it with: ${r.qemu} ${path.relative(process.cwd(), r.bin)}`);
  }, (e) => {
    console.error(`aarch64: build failed\n${e.message}`);
    process.exit(1);
  });
}
