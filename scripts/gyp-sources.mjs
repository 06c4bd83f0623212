// Lists C++ sources for binding.gyp, so that adding a file never means editing the build.
//   (no argument)  the addon: every .cc under native/
//   --tests        the native test runner: native/ minus native/addon, plus test/native/
// native/metal/device.mm is macOS-only and is listed by binding.gyp itself.
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tests = process.argv.includes('--tests');

function walk(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith('.cc')) out.push(relative(root, p));
  }
  return out;
}

let files = walk(join(root, 'native'));
if (tests) files = files.filter((f) => !f.startsWith(join('native', 'addon'))).concat(walk(join(root, 'test', 'native')));
process.stdout.write(files.join(' '));
