// Builds the native table tests (test/native/*.cc + native/ minus the addon glue) on demand for the
// tests that run them: never by `npm install`, so a user's install compiles only the addon.
//   host      build/native-tests/native_tests with $CXX (default c++); test/native-tables.test.ts,
//             test/metal-ops.test.ts and test/metal-emulator.test.ts run it
//   aarch64   build/aarch64/native_tests, cross-compiled with g++-aarch64-linux-gnu and linked
//             statically (qemu then needs no arm64 sysroot), so CI on x86-64 runs the NEON kernels
//             (native/cpu/kernels_neon.cc) under qemu user mode (test/native-neon.test.ts)
// Each object is rebuilt only when its source, any native header, this file or the command changed.
// build({ target }) returns { bin, qemu? }, or { skip: reason } when the aarch64 cross compiler or qemu
// is missing (users never need either; the reason names the Debian packages); a failed compile throws.
// As a script: `node scripts/native-tests.mjs [host|aarch64] [--quiet]`.
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonCxxFlags, nativeSources } from './sources.mjs';
import { writeHeaders } from './msl-kernels.mjs';
import { commandStamp, compileAndLink, headerFiles, withLock } from './build-jobs.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const METAL_HEADERS = path.join(ROOT, 'build', 'metal');

let quiet = process.argv.includes('--quiet');
const log = (m) => { if (!quiet) console.log(`native-tests: ${m}`); };

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

const isMetal = (f) => f.startsWith(path.join('native', 'metal') + path.sep) || /(^|\/)test_metal[^/]*\.cc$/.test(f);

// The host build runs everything, the Metal op layer on the MSL emulator included. The aarch64 build
// leaves out the Metal backend (native/metal/) and test_metal_*.cc: those run their kernels through
// the host's build/mslemu/ library, an x86-64 build, and the Metal path has nothing arm64-specific to
// check here (its kernels are MSL, checked by the emulator tests on the host).
const TARGETS = {
  host: {
    out: path.join(ROOT, 'build', 'native-tests'),
    cxx: () => ({ cxx: process.env.CXX || 'c++' }),
    sources: () => nativeSources({ tests: true }),
    include: [METAL_HEADERS],
    link: ['-pthread', '-ldl'],
  },
  aarch64: {
    out: path.join(ROOT, 'build', 'aarch64'),
    cxx: findCrossCxx,
    sources: () => nativeSources({ tests: true }).filter((f) => !isMetal(f)),
    include: [],
    link: ['-static', '-pthread'],
  },
};

// Every header a source could include (native/, test/native/, the generated Metal headers).
const headers = () => headerFiles([path.join(ROOT, 'native'), path.join(ROOT, 'test', 'native'), METAL_HEADERS]);

export async function build({ target = 'host', quiet: q = quiet } = {}) {
  quiet = q;
  const t = TARGETS[target];
  if (!t) throw new Error(`native-tests: unknown target ${target} (host or aarch64)`);
  const tc = t.cxx();
  if (!tc.cxx) return { skip: tc.reason };
  let qemu;
  if (target === 'aarch64') {
    const qm = findQemu();
    if (!qm.qemu) return { skip: qm.reason };
    qemu = qm.qemu;
  }
  return withLock(t.out, async () => {
    writeHeaders(METAL_HEADERS);  // rewritten only when a kernel changed
    const flags = [...addonCxxFlags(), '-I', path.join(ROOT, 'native'), '-I', path.join(ROOT, 'test', 'native'),
      ...t.include.flatMap((d) => ['-I', d])];
    const deps = [...headers(), SELF, commandStamp(t.out, [tc.cxx, ...flags, ...t.link])];
    const bin = path.join(t.out, 'native_tests');
    const r = await compileAndLink({ cxx: tc.cxx, flags, sources: t.sources(), root: ROOT, out: t.out, deps, bin, linkArgs: t.link,
      jobs: os.availableParallelism(), log: (m) => log(`${target}: ${m}`) });
    log(r.linked ? `linked ${path.relative(ROOT, bin)}` : `${path.relative(ROOT, bin)} is up to date`);
    return { bin, qemu };
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === SELF) {
  const target = process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 'host';
  build({ target }).then((r) => {
    if (r.skip) log(`skipped: ${r.skip}`);
    else log(r.qemu ? `run it with: ${r.qemu} ${path.relative(process.cwd(), r.bin)}` : `built ${path.relative(process.cwd(), r.bin)}`);
  }, (e) => {
    console.error(`native-tests: build failed\n${e.message}`);
    process.exit(1);
  });
}
