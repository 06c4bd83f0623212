// The MSL lint (docs/metal-on-linux.md#compilation): for each .metal file, the pre-pass's textual rules, then
// clang -fsyntax-only on the generated C++ in lint mode, where device/constant/threadgroup are real clang
// address spaces: passing a pointer to the wrong space, a thread array to a device pointer, or computing in
// double is an error at the .metal line.
// The .metal files and the headers under metal/ also get the fast-math rule (prepass.mjs lintNonFinite): no
// INFINITY, NAN, isinf or isnan.
//   node tools/mslemu/lint.mjs [file.metal...]    default: every metal/*.metal and metal/**/*.h; exit 1 on any error
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findClang, LINT_FLAGS } from './build.mjs';
import { ROOT, generate, lintNonFinite, lintText, metalFiles, tokenize } from './prepass.mjs';

// Returns { ok, errors: [...lines] } for one file (path relative to the repository root or absolute).
export function lintFile(file, cxx) {
  const rel = path.relative(ROOT, path.resolve(ROOT, file));
  const src = fs.readFileSync(path.resolve(ROOT, file), 'utf8');
  let errors;
  try {
    errors = lintText(src, rel).map((e) => `${e} [mslemu lint]`);
  } catch (e) {
    return { ok: false, errors: [`${e.message} [mslemu prepass]`], output: '' };
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mslemu-lint-'));
  const gen = path.join(dir, path.basename(rel).replace(/\.metal$/, '.cpp'));
  fs.writeFileSync(gen, generate(src, rel).code);
  // Twice: as Metal 3.1 (bfloat) and as the Metal 3.0 metallib sees the file (-DMSLEMU_NO_BFLOAT), where every
  // use of bfloat must sit inside `#if defined(__HAVE_BFLOAT__)`.
  let output = '';
  for (const [extra, tag] of [[[], ''], [['-DMSLEMU_NO_BFLOAT'], ' [as Metal 3.0, without bfloat]']]) {
    const r = spawnSync(cxx, [...LINT_FLAGS, ...extra, gen], { encoding: 'utf8', cwd: ROOT });
    const out = (r.stdout || '') + (r.stderr || '');
    const before = errors.length, seen = new Set(errors);
    for (const l of out.split('\n'))
      if ((/ error: /.test(l) || / note: candidate function not viable: (cannot pass pointer|no known conversion)/.test(l)) && !seen.has(l.trim())) errors.push(l.trim() + tag);
    if (r.status !== 0 && errors.length === before && !seen.size) errors.push((out.trim() || `${cxx} exited with ${r.status}`) + tag);
    output += out;
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return { ok: errors.length === 0, errors, output };
}

// The headers the kernels include (metal/**/*.h): only the fast-math rule (they hold no kernels).
export function lintHeaders(dir = path.join(ROOT, 'metal')) {
  const errors = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile() || !e.name.endsWith('.h')) continue;
    const file = path.join(e.parentPath ?? e.path, e.name);
    errors.push(...lintNonFinite(tokenize(fs.readFileSync(file, 'utf8')), path.relative(ROOT, file)).map((m) => `${m} [mslemu lint]`));
  }
  return errors;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const tc = findClang();
  if (!tc.cxx) { console.error(`lint:msl skipped: ${tc.reason}`); process.exit(process.argv.includes('--require') ? 1 : 0); }
  const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
  const list = files.length ? files : metalFiles();
  let bad = 0;
  if (!files.length) {
    const h = lintHeaders();
    if (h.length) { bad++; console.log('FAIL  metal/**/*.h'); for (const e of h) console.log(`      ${e}`); } else console.log('ok    metal/**/*.h');
  }
  for (const f of list) {
    const r = lintFile(f, tc.cxx);
    if (r.ok) console.log(`ok    ${f}`);
    else { bad++; console.log(`FAIL  ${f}`); for (const e of r.errors) console.log(`      ${e}`); }
  }
  console.log(`${list.length - bad} passed, ${bad} failed`);
  process.exit(bad ? 1 : 0);
}
