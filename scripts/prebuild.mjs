// Builds the prebuilt addons that the published package ships, into prebuilds/<platform>-<arch>/
// (node-gyp-build's layout; docs/packaging.md says why this layout and how the binaries are built).
// `npm pack` runs it (prepack); it is never shipped and never runs on a user's machine.
//   host          node-gyp's build/Release/tessera.node, brought up to date (`node-gyp build`): the binary
//                 the whole test suite ran is the one that ships
//   linux-arm64   on a linux-x64 host: every addon source cross-compiled with g++-aarch64-linux-gnu, with
//                 binding.gyp's own flags, defines and include dirs (read from it, not restated), into
//                 build/prebuild/linux-arm64/; rebuilt only when a source, a header or the command changed
//   win32-x64     on a linux-x64 host: the same sources cross-compiled with MinGW-w64's g++ (scripts/win32.mjs,
//                 which says how it binds to node.exe or electron.exe)
// Linux binaries link libstdc++ and libgcc statically (binding.gyp's ldflags), so they load on any glibc
// distribution whatever its compiler's age; they are tagged glibc (node-gyp-build skips them on musl).
// Options: --require-arm64, --require-win32 (fail instead of skipping when that cross compiler is
// missing), --quiet.
// macOS prebuilds come from .github/workflows/prebuild.yml (prebuildify on macOS runners).
import { execSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { commandStamp, compileAndLink, headerFiles, withLock } from './build-jobs.mjs';
import { findCrossCxx } from './native-tests.mjs';
import { nativeSources } from './sources.mjs';
import { writeHeaders } from './msl-kernels.mjs';
import { build as buildWin32 } from './win32.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SELF = fileURLToPath(import.meta.url);
const args = new Set(process.argv.slice(2));
// Everything goes to stderr: npm pack --json owns stdout.
const log = (m) => { if (!args.has('--quiet')) console.error(`prebuild: ${m}`); };
const NAME = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).name;

/** prebuilds/<tuple>/<name>.napi[.glibc].node: the file name carries node-gyp-build's tags. */
export function prebuildPath(platform, arch) {
  const tags = platform === 'linux' ? 'napi.glibc' : 'napi';
  return path.join(ROOT, 'prebuilds', `${platform}-${arch}`, `${NAME}.${tags}.node`);
}

function install(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  const tmp = `${to}.tmp`;
  fs.copyFileSync(from, tmp);
  fs.renameSync(tmp, to);
  log(`${path.relative(ROOT, to)} (${(fs.statSync(to).size / 1048576).toFixed(1)} MiB)`);
}

function hostBuild() {
  const gyp = path.join(ROOT, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  const configured = fs.existsSync(path.join(ROOT, 'build', 'config.gypi'));
  // binding.gyp generates the Metal kernel headers at configure time only; a kernel changed since then
  // must reach `node-gyp build` too (rewritten only when their text changed).
  writeHeaders(path.join(ROOT, 'build', 'metal'));
  const r = spawnSync(process.execPath, [gyp, configured ? 'build' : 'rebuild', '-j', String(os.availableParallelism())],
    { cwd: ROOT, stdio: ['ignore', args.has('--quiet') ? 'ignore' : 2, 2] });
  if (r.status !== 0) throw new Error(`node-gyp ${configured ? 'build' : 'rebuild'} failed`);
  install(path.join(ROOT, 'build', 'Release', 'tessera.node'), prebuildPath(process.platform, process.arch));
  // macOS: the kernels compiled ahead of time (binding.gyp's metallib action) go beside the addon, where
  // native/metal/device.mm looks for them
  const metallib = path.join(ROOT, 'build', 'Release', 'tessera.metallib');
  if (process.platform === 'darwin') {
    if (!fs.existsSync(metallib) || fs.statSync(metallib).size === 0)
      throw new Error('build/Release/tessera.metallib is missing or empty: a release needs the kernels compiled by xcrun metal (binding.gyp; Xcode 26: xcodebuild -downloadComponent MetalToolchain)');
    install(metallib, path.join(path.dirname(prebuildPath(process.platform, process.arch)), 'tessera.metallib'));
  }
}

// binding.gyp's tessera target as a compiler command line: its `<!(...)` expansions run as gyp runs them.
function gypFlags() {
  const t = JSON.parse(fs.readFileSync(path.join(ROOT, 'binding.gyp'), 'utf8')).targets.find((x) => x.target_name === 'tessera');
  const expand = (s) => {
    const m = /^<!@?\((.*)\)$/.exec(s);
    return m ? execSync(m[1], { cwd: ROOT, encoding: 'utf8' }).trim() : path.resolve(ROOT, s);
  };
  const linux = (t.conditions ?? []).find(([cond]) => cond === "OS=='linux'")?.[1] ?? {};
  return {
    cflags: [...t.cflags_cc, '-fPIC', '-pthread', ...t.defines.map((d) => `-D${d}`), '-DBUILDING_NODE_EXTENSION',
      ...t.include_dirs.map((d) => `-I${expand(d)}`), `-I${nodeHeaders()}`],
    ldflags: [...(linux.ldflags ?? []), ...(linux.libraries ?? [])],
  };
}

// Node's C headers (node_api.h): beside the running node, else node-gyp's download cache.
function nodeHeaders() {
  const cands = [path.join(path.dirname(process.execPath), '..', 'include', 'node'),
    path.join(os.homedir(), '.cache', 'node-gyp', process.versions.node, 'include', 'node')];
  const found = cands.find((d) => fs.existsSync(path.join(d, 'node_api.h')));
  if (!found) throw new Error(`Node's headers (node_api.h) not found in ${cands.join(' or ')}`);
  return found;
}

const headers = () => headerFiles(['native', 'metal', path.join('build', 'metal')].map((d) => path.join(ROOT, d)));

async function crossBuildArm64() {
  const { cxx, reason } = findCrossCxx();
  if (!cxx) {
    if (args.has('--require-arm64')) throw new Error(`linux-arm64: ${reason}`);
    log(`linux-arm64 skipped: ${reason}`);
    return;
  }
  const out = path.join(ROOT, 'build', 'prebuild', 'linux-arm64');
  await withLock(out, async () => {
    const { cflags, ldflags } = gypFlags();
    const deps = [...headers(), SELF, commandStamp(out, [cxx, ...cflags, '|', ...ldflags])];
    const lib = path.join(out, 'tessera.node');
    await compileAndLink({ cxx, flags: cflags, sources: nativeSources(), root: ROOT, out, deps, bin: lib,
      linkArgs: ['-shared', '-Wl,-soname=tessera.node', ...ldflags], jobs: os.availableParallelism(), log: (m) => log(`linux-arm64: ${m}`) });
    install(lib, prebuildPath('linux', 'arm64'));
  });
}

async function crossBuildWin32() {
  const r = await buildWin32({ target: 'addon', quiet: args.has('--quiet') });
  if (r.skip) {
    if (args.has('--require-win32')) throw new Error(`win32-x64: ${r.skip}`);
    log(`win32-x64 skipped: ${r.skip}`);
    return;
  }
  install(r.file, prebuildPath('win32', 'x64'));
}

try {
  hostBuild();
  if (process.platform === 'linux' && process.arch === 'x64') {
    await crossBuildArm64();
    await crossBuildWin32();
  }
} catch (e) {
  console.error(`prebuild: ${e.message}`);
  process.exit(1);
}
