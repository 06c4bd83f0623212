// Builds fakemetal-smoke (docs/metal-on-linux.md#fake-metal): native/metal/device.mm compiled MRC on the GNU
// Objective-C runtime (-fobjc-runtime=gcc -fno-objc-arc -DTESSERA_FAKE_METAL_MRC) + fake_metal.mm + the op
// layer, linked with the emulator library. Needs clang >= 15, libobjc (libobjc-12-dev) and
// libBlocksRuntime (libblocksruntime-dev). Returns { available, reason, bin }.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pool, stale } from '../../scripts/build-jobs.mjs';
import { build as buildEmu, findClang } from '../mslemu/build.mjs';
import { ROOT, writeHeaders } from '../mslemu/prepass.mjs';

const OUT = path.join(ROOT, 'build', 'fakemetal');
const STUBS = path.join(ROOT, 'tools/fakemetal/stubs');
const INC = ['-I', path.join(ROOT, 'native'), '-I', path.join(ROOT, 'build/metal')];
const CXX_FLAGS = ['-std=c++17', '-O1', '-ffp-contract=off', '-DTESSERA_HAVE_METAL=1', '-Wall', '-Wno-unused-parameter', ...INC];
const MRC_FLAGS = ['-x', 'objective-c++', '-std=c++17', '-O1', '-fobjc-runtime=gcc', '-fno-objc-arc', '-fblocks', '-DTESSERA_FAKE_METAL_MRC',
  '-DTESSERA_HAVE_METAL=1', '-Wall', '-Wno-unused-parameter', '-Wno-objc-root-class', '-I', STUBS, ...INC];

function probe(cxx) {
  const dir = fs.mkdtempSync(path.join(OUT, 'probe-'));
  const src = path.join(dir, 'p.mm');
  fs.writeFileSync(src, '#include <Block.h>\nint main() { void (^b)(void) = ^{}; b(); return 0; }\n');
  const r = spawnSync(cxx, ['-x', 'objective-c++', '-fobjc-runtime=gcc', '-fblocks', src, '-o', path.join(dir, 'p'), '-lobjc', '-lBlocksRuntime'], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  return r.status === 0 ? null : `cannot build Objective-C with blocks on the GNU runtime (install libobjc-12-dev and libblocksruntime-dev): ${(r.stderr || '').split('\n')[0]}`;
}

export async function buildSmoke() {
  const tc = findClang();
  if (!tc.cxx) return { available: false, reason: tc.reason };
  fs.mkdirSync(OUT, { recursive: true });
  const why = probe(tc.cxx);
  if (why) return { available: false, reason: why };
  const emu = await buildEmu({ quiet: true });
  if (!emu.available) return { available: false, reason: emu.reason };
  writeHeaders(path.join(ROOT, 'build/metal'));
  const list = (d) => fs.readdirSync(path.join(ROOT, d)).filter((f) => f.endsWith('.cc')).map((f) => path.join(ROOT, d, f));
  const cc = [...list('native/common'), ...list('native/backend'), ...list('native/metal'), ...list('native/metal/ops'), path.join(ROOT, 'tools/fakemetal/smoke.cc')];
  const mm = [path.join(ROOT, 'native/metal/device.mm'), path.join(ROOT, 'tools/fakemetal/fake_metal.mm')];
  // Every header under native/ (a changed struct in common/ or backend/ changes every object's ABI),
  // the stubs and the generated sources list.
  const headers = (d) => fs.readdirSync(d, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? headers(path.join(d, e.name)) : /\.(h|inc)$/.test(e.name) ? [path.join(d, e.name)] : []);
  const deps = [...headers(path.join(ROOT, 'native')),
    path.join(STUBS, 'Metal/Metal.h'), path.join(STUBS, 'Foundation/Foundation.h'), path.join(ROOT, 'build/metal/sources.gen.h')];
  const objs = [];
  const jobs = [];
  for (const src of [...cc, ...mm]) {
    const obj = path.join(OUT, 'obj', path.relative(ROOT, src).replace(/[/\\]/g, '_') + '.o');
    objs.push(obj);
    if (!stale(obj, [src, ...deps])) continue;
    fs.mkdirSync(path.dirname(obj), { recursive: true });
    jobs.push({ cmd: tc.cxx, args: [...(src.endsWith('.mm') ? MRC_FLAGS : CXX_FLAGS), '-c', src, '-o', obj], what: `compile ${path.relative(ROOT, src)}` });
  }
  await pool(jobs, 2);
  const bin = path.join(OUT, 'smoke');
  const libdir = path.join(ROOT, 'build/mslemu');
  await pool([{ cmd: tc.cxx, args: ['-o', bin, ...objs, `-L${libdir}`, '-ltessera_mslemu', `-Wl,-rpath,${libdir}`, '-lobjc', '-lBlocksRuntime', '-lpthread', '-ldl'], what: 'link smoke' }], 1);
  return { available: true, bin };
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  buildSmoke().then((r) => {
    if (!r.available) { console.log(`fakemetal skipped: ${r.reason}`); process.exit(process.argv.includes('--require') ? 1 : 0); }
    const s = spawnSync(r.bin, [], { stdio: 'inherit', env: { ...process.env, TESSERA_MSLEMU_LIB: path.join(ROOT, 'build/mslemu/libtessera_mslemu.so') } });
    process.exit(s.status ?? 1);
  }, (e) => { console.error(e.message); process.exit(1); });
}
