// The CommonJS entry point (`require('tessera-vision')`), built after tsc has written the ES module build
// and its declarations into dist/. esbuild bundles src/index.ts into dist/cjs/index.cjs with every
// dependency left external (sharp, zod, node-gyp-build load as themselves); import.meta.url, which
// CommonJS lacks, becomes the bundle's own file URL (src/package-root.ts finds the package root from any
// depth). The declarations are copied beside it under a {"type": "commonjs"} package.json, so TypeScript
// reads them as CommonJS for `require` consumers and as ESM for `import` ones (package.json exports).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIST = path.join(ROOT, 'dist');
const OUT = path.join(DIST, 'cjs');

await build({
  entryPoints: [path.join(ROOT, 'src', 'index.ts')],
  outfile: path.join(OUT, 'index.cjs'),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  packages: 'external',
  define: { 'import.meta.url': '__tessera_module_url' },
  banner: { js: "const __tessera_module_url = require('node:url').pathToFileURL(__filename).href;" },
  logLevel: 'warning',
});

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
