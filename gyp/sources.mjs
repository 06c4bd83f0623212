// Lists C++ sources for binding.gyp, so that adding a file never means editing the build.
//   (no argument)  the addon: every .cc under native/
//   --tests        the native test runner: native/ minus native/addon, plus test/native/
//   --no-addon     native/ minus native/addon (programs that run the towers' code without Node: the bench)
// native/metal/device.mm is macOS-only and is listed by binding.gyp itself.
// Also imported by tools/native-tests.mjs (the table tests, built on demand by the tests), so both
// builds list their sources and take their C++ flags alike.
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function walk(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.cc')) out.push(relative(root, p));
  }
  return out;
}

// Paths relative to the repository root.
export function nativeSources({ tests = false, addon = !tests } = {}) {
  const files = walk(join(root, 'native')).filter((f) => addon || !f.startsWith(join('native', 'addon')));
  return tests ? files.concat(walk(join(root, 'test', 'native'))) : files;
}

// The C++ flags binding.gyp gives the addon (its cflags_cc), for the table tests built outside gyp.
export function addonCxxFlags() {
  const gyp = JSON.parse(readFileSync(join(root, 'binding.gyp'), 'utf8'));
  return gyp.targets.find((t) => t.target_name === 'tessera').cflags_cc;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.stdout.write(nativeSources({ tests: process.argv.includes('--tests'), addon: !process.argv.includes('--no-addon') && !process.argv.includes('--tests') }).join(' '));
}
