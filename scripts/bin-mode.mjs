// Sets the run bit on the `tessera` command (package.json "bin": dist/cli/main.js) after tsc has
// written it: tsc writes files without it, so in a clone `npx tessera` would say "Permission denied".
// (npm sets the bit itself when it installs the package; a clone has no install step for its own bin.)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
for (const bin of Object.values(pkg.bin ?? {})) {
  const file = path.join(ROOT, bin);
  fs.chmodSync(file, fs.statSync(file).mode | 0o111);
}
