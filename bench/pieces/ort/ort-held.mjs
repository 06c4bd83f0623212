// onnxruntime held to AVX2 on an AVX-512 host, for the ort-peer-avx2 piece: a patched copy of
// onnxruntime-node's library in which every AVX-512 check fails.
//
// Why a patch: MLAS picks its kernels once, when the library loads, from CPUID and XGETBV
// (onnxruntime/core/mlas/lib/platform.cpp: AVX-512F in CPUID leaf 7 and the ZMM state bits 5-7 of
// XCR0 enabled by the OS -> its AVX-512 kernels, else AVX2+FMA -> its FMA3 kernels), and no
// environment variable or session option lowers that choice. Linux offers no per-process way to
// hide AVX-512 from CPUID or XGETBV on this kind of VM (no CPUID faulting). So the copy is patched
// where the library reads XCR0: each test of the AVX-512 state bits (masks 0xe0 and 0xe6, after
// each `xgetbv`) is widened to bit 3 too, the MPX bound-register state, which Linux has never
// enabled since it dropped MPX (5.6) and AMD CPUs do not have: the test then says "no OS support
// for AVX-512", exactly what an AVX2-only CPU or a VM hiding AVX-512 makes it say, and MLAS
// (and the library's other CPU-feature probes) take their AVX2 paths. Nothing else in the library changes.
// The bench checks the result (ort-peer.mjs: a held ORT row above the AVX2 FMA peak is refused).
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';

const require = createRequire(import.meta.url);
const XGETBV = Buffer.from([0x0f, 0x01, 0xd0]);
const WINDOW = 2048; // bytes after an xgetbv in which its result is tested
// The XCR0 tests of AVX-512 state as this library's compiler emits them, and their widened form
// (| 0x08). `not rax; test al, imm8` (ZF = 1: all bits enabled) and `cmp r14d, imm32` after an
// `and r14d, 0xe6`.
const TESTS = [
  { name: 'not rax; test al, 0xe0', find: [0x48, 0xf7, 0xd0, 0xa8, 0xe0], at: 4 },
  { name: 'not rax; test al, 0xe6', find: [0x48, 0xf7, 0xd0, 0xa8, 0xe6], at: 4 },
  { name: 'cmp r14d, 0xe6', find: [0x41, 0x81, 0xfe, 0xe6, 0x00, 0x00, 0x00], at: 3 },
];
const MPX_BNDREGS = 0x08;

/** The offsets of `pattern` in buf[from, to). */
function findAll(buf, pattern, from = 0, to = buf.length) {
  const at = [];
  for (let i = buf.indexOf(pattern, from); i >= 0 && i < to; i = buf.indexOf(pattern, i + 1)) at.push(i);
  return at;
}

/** Patches lib (a Buffer) in place; returns the patched sites [{ offset, test }]. */
export function patchAvx512Checks(lib) {
  const sites = [];
  for (const x of findAll(lib, XGETBV)) {
    for (const t of TESTS) {
      for (const i of findAll(lib, Buffer.from(t.find), x + XGETBV.length, x + XGETBV.length + WINDOW)) {
        if (sites.some((s) => s.offset === i + t.at)) continue;
        lib[i + t.at] |= MPX_BNDREGS;
        sites.push({ offset: i + t.at, test: t.name });
      }
    }
  }
  return sites;
}

/** Where a copy of onnxruntime-node at pkgDir keeps its linux-x64 library, or null without one. */
export function linuxX64Library(pkgDir) {
  const napi = readdirSync(join(pkgDir, 'bin')).find((d) => existsSync(join(pkgDir, 'bin', d, 'linux', 'x64', 'libonnxruntime.so.1')));
  return napi ? join(pkgDir, 'bin', napi, 'linux', 'x64', 'libonnxruntime.so.1') : null;
}

/**
 * Makes (once) a copy of onnxruntime-node under outDir whose library sees no AVX-512, for linux-x64.
 * Returns { dir, sites, version } (dir: what to require) or { dir: null, why }.
 */
export function ortHeldToAvx2(outDir) {
  if (process.platform !== 'linux' || process.arch !== 'x64') return { dir: null, why: `the patch is for linux-x64 builds (this is ${process.platform}-${process.arch})` };
  const src = dirname(require.resolve('onnxruntime-node/package.json'));
  const version = JSON.parse(readFileSync(join(src, 'package.json'), 'utf8')).version;
  // In a node_modules folder of its own, beside its one dependency, so that its imports resolve
  // wherever outDir is.
  const dir = join(outDir, `ort-held-avx2-${version}`, 'node_modules', 'onnxruntime-node');
  const srcLib = linuxX64Library(src);
  if (!srcLib) return { dir: null, why: 'onnxruntime-node has no linux-x64 libonnxruntime.so.1' };
  const libRel = relative(src, srcLib), x64 = dirname(srcLib);
  const stamp = join(dir, 'held-avx2.json');
  if (existsSync(stamp)) return { dir, ...JSON.parse(readFileSync(stamp, 'utf8')), version };
  rmSync(dirname(dir), { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // The package without its other platforms' binaries.
  cpSync(src, dir, { recursive: true, filter: (p) => !p.startsWith(join(src, 'bin')) || x64.startsWith(p) || p.startsWith(x64) });
  let common = createRequire(join(src, 'package.json')).resolve('onnxruntime-common'); // its exports hide package.json
  while (!(common.endsWith('onnxruntime-common') && existsSync(join(common, 'package.json'))) && common !== dirname(common)) common = dirname(common);
  cpSync(common, join(dirname(dir), 'onnxruntime-common'), { recursive: true });
  const lib = readFileSync(join(dir, libRel));
  const sites = patchAvx512Checks(lib);
  if (!sites.some((s) => s.test.endsWith('0xe0'))) {
    rmSync(dirname(dir), { recursive: true, force: true });
    return { dir: null, why: `onnxruntime ${version}'s library has no AVX-512 state test this patch knows (${sites.length} other sites): it would still run AVX-512` };
  }
  writeFileSync(join(dir, libRel), lib);
  writeFileSync(stamp, JSON.stringify({ sites }));
  return { dir, sites, version };
}
