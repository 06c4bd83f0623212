// npm's install step for tessera-vision (package.json "install"). A user's install uses the prebuilt
// addon for this platform (prebuilds/<platform>-<arch>/) when it loads, and compiles nothing; only when
// none loads does it build from source with node-gyp, after checking that the tools a source build needs
// are on PATH, and naming the missing ones if not. A clone (a .git beside this package.json) always
// builds from source: contributors change the native code. Node built-ins and node-gyp-build only.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (m) => process.stderr.write(`tessera-vision: ${m}\n`);

function prebuiltLoads() {
  if (existsSync(path.join(ROOT, '.git'))) return false;
  try {
    createRequire(import.meta.url)('node-gyp-build')(ROOT);
    return true;
  } catch (e) {
    const prebuilt = (() => { try { return readdirSync(path.join(ROOT, 'prebuilds')).sort(); } catch { return []; } })();
    // node-gyp-build honours npm's --arch / --platform (cross installs), so the message does too.
    const target = `${process.env.npm_config_platform || process.platform}-${process.env.npm_config_arch || process.arch}`;
    say(`no prebuilt addon loads on ${target} ` +
      `(prebuilt: ${prebuilt.join(', ') || 'none'}; ${String(e.message).split('\n')[0]}): building from source`);
    return false;
  }
}

function onPath(names) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    for (const n of names) {
      try { accessSync(path.join(dir, n), constants.X_OK); return n; } catch { /* next */ }
    }
  }
  return null;
}

// What node-gyp needs; each entry: what it is, and the commands that would do.
function missingTools() {
  const needs = [
    ['a C++20 compiler', process.env.CXX ? [process.env.CXX] : ['c++', 'g++', 'clang++']],
    ['make', ['make', 'gmake']],
    ['Python 3', ['python3', 'python']],
  ];
  if (process.platform === 'win32') return [];  // node-gyp finds Visual Studio itself
  return needs.filter(([, cmds]) => !onPath(cmds)).map(([what, cmds]) => `${what} (${cmds.join(' / ')})`);
}

if (!prebuiltLoads()) {
  const missing = missingTools();
  if (missing.length) {
    say(`cannot build the native addon from source: missing ${missing.join(', ')}. ` +
      'Install them (Debian/Ubuntu: apt-get install g++ make python3; macOS: xcode-select --install), ' +
      'then run `npm rebuild tessera-vision`.');
    process.exit(1);
  }
  // npm runs install scripts with its own node-gyp in npm_config_node_gyp; a clone also has the devDependency.
  const gyp = process.env.npm_config_node_gyp;
  const [cmd, args] = gyp ? [process.execPath, [gyp, 'rebuild']] : ['node-gyp', ['rebuild']];
  const r = spawnSync(cmd, args, { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.error) say(`could not run node-gyp (${r.error.message}): run this through npm (npm install / npm rebuild tessera-vision)`);
  process.exit(r.status ?? 1);
}
