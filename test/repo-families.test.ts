// A model family is its two folders and a line in each registry (docs/design.md#the-family-layer): no code
// outside them decides anything by a family id or a config.json model_type. Every tracked source file is read,
// its comments left out, and each string literal that is exactly a registered family id or model_type is
// listed; a file that has one must be under src/families/ or native/models/ (which hold both registries), or
// be a doc or a test. scripts/ is a developer's programs that make or measure named families' checkpoints
// (synthetic-tower makers, benches, the downstream and bf16 checks): naming a family is what they are for,
// and the product never runs them.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FAMILIES, MODEL_TYPES } from '../src/families/registry.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const NAMES = new Set<string>([...FAMILIES, ...MODEL_TYPES]);
const ALLOWED = [/^src\/families\//, /^native\/models\//, /^docs\//, /^test\//, /\.md$/, /^scripts\//];

const SOURCES = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((f) => /\.(ts|mts|cts|js|mjs|cjs|cc|cpp|h|hpp|mm|metal|py|sh|gyp)$/.test(f) && existsSync(join(ROOT, f)));

/** The string literals of a source file, comments left out (C-like comments; `#` comments in Python and shell). */
export function stringLiterals(text: string, hashComments: boolean): string[] {
  const token = hashComments
    ? /(["'`])((?:\\[\s\S]|(?!\1)[^\\])*)\1|#[^\n]*/g
    : /(["'`])((?:\\[\s\S]|(?!\1)[^\\])*)\1|\/\/[^\n]*|\/\*[\s\S]*?\*\//g;
  return [...text.matchAll(token)].filter((m) => m[1] !== undefined).map((m) => m[2]!);
}

function namesIn(file: string): string[] {
  const literals = stringLiterals(readFileSync(join(ROOT, file), 'utf8'), /\.(py|sh|gyp)$/.test(file));
  return [...new Set(literals.filter((s) => NAMES.has(s)))];
}

describe('family ids and model_types', () => {
  const naming = SOURCES.map((file) => ({ file, names: namesIn(file) })).filter((f) => f.names.length);

  it('the reader finds literals and skips comments', () => {
    expect(stringLiterals(`const a = 'x'; // 'y'\n/* "z" */ f("w", \`v\`)`, false)).toEqual(['x', 'w', 'v']);
    expect(stringLiterals(`a = 'x'  # 'y'`, true)).toEqual(['x']);
    // The family folders do name their ids: the scan sees them (else every check below would pass vacuously).
    const files = naming.map((f) => f.file);
    expect(files.filter((f) => f.startsWith('src/families/')).length).toBeGreaterThanOrEqual(2);
  });

  it('only the family folders, the registries, docs, tests and scripts name one', () => {
    const outside = naming.filter((f) => !ALLOWED.some((a) => a.test(f.file))).map((f) => `${f.file}: ${f.names.join(', ')}`);
    expect(outside).toEqual([]);
  });
});
