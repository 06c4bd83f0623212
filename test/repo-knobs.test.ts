// The TESSERA_* knobs have one registry (tools/knobs.json) and docs/knobs.md is made from it: a knob read
// anywhere in the product, its tests, tools, bench or verification kits that the registry does not list fails
// here, as does a registry entry nothing reads and a docs/knobs.md older than the registry.
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ESM tool, without declarations
import { loadRegistry, render, scan, DOC } from '../tools/knobs.mjs';
import { readFileSync } from 'node:fs';

type Knob = { name: string; kind: 'env' | 'build'; meaning: string; default: string; audience: string; reader: string; external?: boolean };
type Read = { name: string; kind: string; file: string };

const registry: { knobs: Knob[] } = loadRegistry();
const reads: Read[] = scan();

describe('the knob registry', () => {
  it('the scanner finds reads in each language (getenv, #ifndef, process.env, shell)', () => {
    const files = new Set(reads.map((r) => r.file));
    for (const f of ['native/common/cpu_features.cc', 'native/cpu/gemm.cc', 'src/residency/policy.ts', 'verify/bf16-check/run.sh'])
      expect(files, f).toContain(f);
  });

  it('lists every knob read anywhere, with the kind it is read as', () => {
    const listed = new Map(registry.knobs.map((k) => [k.name, k.kind]));
    const unlisted = reads.filter((r) => listed.get(r.name) !== r.kind).map((r) => `${r.name} (${r.kind}) in ${r.file}`);
    expect(unlisted, 'add these to tools/knobs.json, then run node tools/knobs.mjs').toEqual([]);
  });

  it('lists each knob once, each with a meaning, a default and a reader, and nothing that no file reads', () => {
    const names = registry.knobs.map((k) => k.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
    for (const k of registry.knobs) {
      expect(k.name, k.name).toMatch(/^TESSERA_[A-Z0-9_]+$/);
      expect([k.meaning, k.default, k.reader, k.audience].every((s) => typeof s === 'string' && s.length > 0), k.name).toBe(true);
      expect(['user', 'test', 'bench', 'verify', 'tuning', 'build'], k.name).toContain(k.audience);
    }
    const read = new Set(reads.map((r) => r.name));
    expect(registry.knobs.filter((k) => !k.external && !read.has(k.name)).map((k) => k.name)).toEqual([]);
  });

  it('docs/knobs.md is what node tools/knobs.mjs makes of it', () => {
    expect(readFileSync(DOC, 'utf8') === render(registry, reads), 'docs/knobs.md is out of date: run node tools/knobs.mjs').toBe(true);
  });
});
