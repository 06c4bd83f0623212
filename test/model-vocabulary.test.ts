// The vocabularies stated on both sides of the TypeScript/C++ line, held against each other:
// - stage kinds: the kinds a family's TowerSpec gives its stages (src/families/<family>/) are exactly
//   the kinds its native tower acts on (the `{"kind", handler}` entries of native/models/<family>/tower.cc);
// - tensor roles: every role the TowerSpec gives a tensor is a name the native tower reads (a string
//   literal in its folder or the shared ViT parts it is written with, or a literal prefix plus a literal
//   suffix: "self_attn.q_proj" + ".input_min"), and every whole role the tower names (".weight" / ".bias")
//   is one the TowerSpec gives, so that no tensor is loaded and silently ignored and no lookup silently
//   finds nothing;
// - dtypes: the weight dtypes a TowerSpec may name (src/spec/types.ts DTYPES) are exactly the names
//   native/common/dtype.cc parses, and the ones tessera computes with are the rest;
// - error codes: every code the addon reports (its own list, from native/common/error.h) is one
//   src/errors.ts knows (an unknown one would become ERR_INTERNAL), and each is in docs/design.md's table.
// The specs are those of the fixture towers (every source kind: HF folders and a GGUF).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, VisionTower } from '../src/index.js';
import { addon } from '../src/native.js';
import { COMPUTE_DTYPES, DTYPES } from '../src/spec/types.js';
import { FIXTURES } from './helpers/fixtures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VIT = ['native/models/vit/block.cc', 'native/models/vit/merger.cc'];
const FAMILIES = {
  qwen3: { tower: 'native/models/qwen3/tower.cc', sources: VIT, models: ['qwen3_5-tiny/model', 'qwen3_vl-tiny/model'] },
  qwen2: { tower: 'native/models/qwen2/tower.cc', sources: VIT, models: ['qwen2_vl-tiny/model', 'qwen2_5_vl-tiny/model'] },
  gemma4: { tower: 'native/models/gemma4/tower.cc', sources: ['native/models/gemma4/clippable.h', 'native/models/gemma4/clippable.cc'], models: ['gemma4-tiny/model', 'gemma4-tiny/mmproj-gemma4v-f16.gguf'] },
};

const specs = new Map<string, { kinds: Set<string>; roles: Set<string> }>();
beforeAll(async () => {
  for (const [family, f] of Object.entries(FAMILIES)) {
    const kinds = new Set<string>();
    const roles = new Set<string>();
    for (const m of f.models) {
      const tower = await VisionTower.open(join(FIXTURES, m), { residency: 'mapped', backend: 'cpu' });
      for (const s of tower.spec.stages) {
        kinds.add(s.kind);
        for (const t of s.tensors) roles.add(t.role);
      }
      await tower.close();
    }
    specs.set(family, { kinds, roles });
  }
}, 120_000);
afterAll(() => specs.clear());

/** The string literals of a C++ file, comments left out. */
function literals(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8').replace(/\/\/[^\n]*/g, '');
  return [...text.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!);
}

describe.each(Object.entries(FAMILIES))('%s: TowerSpec against the native tower', (family, f) => {
  it('the stage kinds are the ones the tower acts on', () => {
    const text = readFileSync(join(ROOT, f.tower), 'utf8');
    const native = new Set([...text.matchAll(/\{\s*"([a-z_]+)",\s*\[&\]/g)].map((m) => m[1]!));
    expect(native.size).toBeGreaterThan(2);
    expect([...specs.get(family)!.kinds].sort()).toEqual([...native].sort());
  });

  it('every tensor role is one the tower reads, and every role it names is given', () => {
    const lits = [f.tower, ...f.sources].flatMap(literals);
    const whole = new Set(lits);
    const read = (role: string) =>
      whole.has(role) || lits.some((p) => p.length > 0 && role.startsWith(p) && whole.has(role.slice(p.length)));
    const { roles } = specs.get(family)!;
    expect([...roles].filter((r) => !read(r))).toEqual([]);
    // (The towers build most names from a stem and a suffix; the whole ones still stand as literals.)
    const named = lits.filter((l) => /^[a-z_0-9]+(\.[a-z_0-9]+)*\.(weight|bias)$/.test(l));
    expect(named.length).toBeGreaterThan(0);
    expect(named.filter((r) => !roles.has(r) && ![...roles].some((g) => g.endsWith('.' + r)))).toEqual([]);
  });
});

describe('dtypes', () => {
  it('DTYPES are the names native parse_dtype accepts; COMPUTE_DTYPES all but the stored-only q8_0', () => {
    const text = readFileSync(join(ROOT, 'native', 'common', 'dtype.cc'), 'utf8');
    const body = text.slice(text.indexOf('bool parse_dtype'), text.indexOf('}', text.indexOf('bool parse_dtype')));
    const native = [...body.matchAll(/s == "([a-z0-9_]+)"/g)].map((m) => m[1]!);
    expect(native.length).toBeGreaterThan(2);
    expect([...DTYPES].sort()).toEqual(native.sort());
    expect(DTYPES.filter((d) => !(COMPUTE_DTYPES as readonly string[]).includes(d))).toEqual(['q8_0']);
  });
});

describe('error codes', () => {
  it('every code the addon reports is known to src/errors.ts and documented', () => {
    const native = addon().errorCodes as string[];
    expect(native).toContain('ERR_INTERNAL');
    expect(native.filter((c) => !(ERROR_CODES as readonly string[]).includes(c))).toEqual([]);
    const design = readFileSync(join(ROOT, 'docs', 'design.md'), 'utf8');
    expect(ERROR_CODES.filter((c) => !design.includes('`' + c + '`'))).toEqual([]);
  });
});
