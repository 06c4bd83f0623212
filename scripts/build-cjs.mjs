// The CommonJS build (`require('tessera-vision')`, `require('tessera-vision/fleet')`,
// `require('tessera-vision/bulk')`), made after tsc has written the ES module build and its
// declarations into dist/. esbuild transpiles every module of src/ on its own (no bundle) into
// dist/cjs/, under a {"type": "commonjs"} package.json, so the relative requires between them resolve
// to one module each: the entries share their modules (one TesseraError class, one addon handle) as
// the ES build's do. Dependencies load as themselves. import.meta.url, which CommonJS lacks, becomes
// each file's own URL (src/package-root.ts finds the package root from any depth). dist/cjs/index.cjs
// stays the main entry. The declarations are copied beside the modules, so TypeScript reads them as
// CommonJS for `require` consumers and as ESM for `import` ones (package.json exports).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SRC = path.join(ROOT, 'src');
const DIST = path.join(ROOT, 'dist');
const OUT = path.join(DIST, 'cjs');

// The command line (dist/cli, an ES module run by node) has no CommonJS entry.
const sources = fs
  .readdirSync(SRC, { recursive: true })
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.startsWith('cli' + path.sep))
  .map((f) => path.join(SRC, f));
fs.rmSync(OUT, { recursive: true, force: true });
await build({
  entryPoints: sources,
  outdir: OUT,
  outbase: SRC,
  bundle: false,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  define: { 'import.meta.url': '__tessera_module_url' },
  banner: { js: "const __tessera_module_url = require('node:url').pathToFileURL(__filename).href;" },
  logLevel: 'warning',
});
fs.writeFileSync(path.join(OUT, 'index.cjs'), "'use strict';\nmodule.exports = require('./index.js');\n");

function copyDeclarations(from, to) {
  for (const e of fs.readdirSync(from, { withFileTypes: true })) {
    const src = path.join(from, e.name);
    if (e.isDirectory()) {
      if (src !== OUT) copyDeclarations(src, path.join(to, e.name));
    } else if (e.name.endsWith('.d.ts')) {
      fs.mkdirSync(to, { recursive: true });
      fs.copyFileSync(src, path.join(to, e.name));
    }
  }
}
copyDeclarations(DIST, OUT);
fs.writeFileSync(path.join(OUT, 'package.json'), '{ "type": "commonjs" }\n');
