// The layers of src/ (docs/design.md#layering): arrows run one way, cli -> fleet -> bulk -> core.
// Every import of every module under src/ is read (static `from '...'`, `import '...'` and
// dynamic `import('...')`) and resolved; a module may import its own layer and the layers below
// it, never one above. src/index.ts, the library's entry, sits above bulk (it exports the bulk
// writer) and below fleet and cli.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src', import.meta.url));

/** Layers from the top; a module sits in the first whose test it passes. */
const LAYERS: { name: string; holds: (rel: string) => boolean }[] = [
  { name: 'cli', holds: (r) => r.startsWith('cli/') },
  { name: 'fleet', holds: (r) => r.startsWith('fleet/') },
  { name: 'entry', holds: (r) => r === 'index.ts' },
  { name: 'bulk', holds: (r) => r.startsWith('bulk/') },
  { name: 'core', holds: () => true },
];

const layerOf = (rel: string) => LAYERS.findIndex((l) => l.holds(rel));

function modules(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? modules(join(dir, d.name)) : d.name.endsWith('.ts') ? [join(dir, d.name)] : [],
  );
}

/** The src/-relative .ts paths a module imports (packages and node: builtins left out). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)'([^']+)'/gm)].map((m) => m[1]!);
  return specs.filter((s) => s.startsWith('.')).map((s) => relative(SRC, resolve(dirname(file), s)).replace(/\.js$/, '.ts').split('\\').join('/'));
}

const ALL = modules(SRC);

describe('src/ layers', () => {
  it('reads the imports of every module (the parser sees them)', () => {
    // The CLI's dispatcher imports its commands; if the parser missed them, every check below would pass vacuously.
    expect(importsOf(join(SRC, 'cli/main.ts'))).toContain('cli/encode.ts');
    expect(importsOf(join(SRC, 'cli/main.ts'))).toContain('cli/worker.ts'); // a dynamic import
  });

  it('no module imports a layer above its own', () => {
    const wrong: string[] = [];
    for (const file of ALL) {
      const rel = relative(SRC, file).split('\\').join('/');
      for (const target of importsOf(file)) {
        if (layerOf(target) < layerOf(rel)) wrong.push(`${rel} (${LAYERS[layerOf(rel)]!.name}) imports ${target} (${LAYERS[layerOf(target)]!.name})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('every import resolves to a module under src/', () => {
    const names = new Set(ALL.map((f) => relative(SRC, f).split('\\').join('/')));
    const missing = ALL.flatMap((f) => importsOf(f).filter((t) => !names.has(t)).map((t) => `${relative(SRC, f)} -> ${t}`));
    expect(missing).toEqual([]);
  });
});

// scripts/ is the package's own build and install (the native source list, the Metal kernel headers, the
// CommonJS bundle, the prebuilds, the native test runner's build); the apparatus around it (tools/, bench/,
// verify/) builds on it, never the other way round, so that the product's build needs none of them.
describe('scripts/ and the apparatus', () => {
  const ROOT = fileURLToPath(new URL('..', import.meta.url));
  const scriptsOf = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.name === 'node_modules' ? [] : d.isDirectory() ? scriptsOf(join(dir, d.name)) : /\.(mjs|ts)$/.test(d.name) ? [join(dir, d.name)] : []));
  const specs = (file: string) => [...readFileSync(file, 'utf8').matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)'([^']+)'/gm)].map((m) => resolve(dirname(file), m[1]!));

  it('no module under scripts/ imports one under tools/, bench/, verify/ or test/', () => {
    const tools = scriptsOf(join(ROOT, 'tools'));
    expect(tools.some((f) => specs(f).some((s) => s.startsWith(join(ROOT, 'scripts') + '/')))).toBe(true); // the parser sees imports
    const apparatus = ['tools', 'bench', 'verify', 'test'].map((d) => join(ROOT, d) + '/');
    const wrong = scriptsOf(join(ROOT, 'scripts')).flatMap((f) =>
      specs(f).filter((s) => apparatus.some((a) => s.startsWith(a))).map((s) => `${relative(ROOT, f)} -> ${relative(ROOT, s)}`));
    expect(wrong).toEqual([]);
  });
});
