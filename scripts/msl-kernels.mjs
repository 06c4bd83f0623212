// The addon's view of the MSL kernels (metal/*.metal), part of the product's build: binding.gyp runs
// `node scripts/msl-kernels.mjs headers` at configure time, and a source build from the published
// package runs it too. It parses every `kernel void` (parameters, attributes, threadgroup arrays) and writes,
// into build/metal/:
//   kernels.gen.h     every kernel's buffer and threadgroup parameters, argument sizes, thread limit
//   tessera_kargs.h   forwards to metal/shared/args.h (native/ cannot name the repository root)
//   sources.gen.h     each metal/*.metal with its local includes inlined (for newLibraryWithSource:), and
//                     the name of the stamp kernel (kStampKernel) that ties a metallib to these sources
//   src/*.metal       the same text, for xcrun metal, plus tessera_stamp.metal: one empty kernel named after
//                     a hash of all the sources (device.mm loads a tessera.metallib only if it holds it)
// The parser is shared with the MSL emulator's pre-pass (tools/mslemu/prepass.mjs), which turns the
// same parse into C++ for clang. Node only, no dependencies.
//   node scripts/msl-kernels.mjs headers [outdir]   writes the headers, prints outdir
//   node scripts/msl-kernels.mjs metallib <out> [--if-toolchain]
//                     (macOS) the headers, then every src/*.metal through Apple's compiler (METAL_COMPILE,
//                     -Werror) and one metallib at <out>, which ships beside the darwin addon (device.mm loads
//                     it; without it, the source compile). binding.gyp passes --if-toolchain: a Mac without
//                     the Metal toolchain (Xcode 26 downloads it separately) still builds the addon, with an
//                     empty <out> that device.mm cannot load, and a warning; a compile error still fails.
//   node scripts/msl-kernels.mjs sources            the files the metallib is made from (binding.gyp inputs)
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export class PrepassError extends Error {}
const fail = (file, line, msg) => { throw new PrepassError(`${file}:${line}: ${msg}`); };

// Identifiers, numbers and punctuation with offsets and lines; comments, strings and preprocessor lines skipped.
export function tokenize(s) {
  const toks = [];
  let i = 0, line = 1, bol = true;
  while (i < s.length) {
    const c = s[i];
    if (c === '\n') { line++; i++; bol = true; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (bol && c === '#') {
      while (i < s.length && s[i] !== '\n') { if (s[i] === '\\' && s[i + 1] === '\n') { i++; line++; } i++; }
      continue;
    }
    bol = false;
    if (c === '/' && s[i + 1] === '/') { while (i < s.length && s[i] !== '\n') i++; continue; }
    if (c === '/' && s[i + 1] === '*') {
      i += 2;
      while (i < s.length && !(s[i] === '*' && s[i + 1] === '/')) { if (s[i] === '\n') line++; i++; }
      i += 2; continue;
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < s.length && s[j] !== c) { if (s[j] === '\\') j++; j++; }
      toks.push({ t: s.slice(i, j + 1), at: i, line }); i = j + 1; continue;
    }
    let m = /^[A-Za-z_]\w*/.exec(s.slice(i, i + 256));
    if (m) { toks.push({ t: m[0], at: i, line, id: true }); i += m[0].length; continue; }
    m = /^(\.?\d[\w.]*([eEpP][+-]\d+)?\w*)/.exec(s.slice(i, i + 64));
    if (m) { toks.push({ t: m[0], at: i, line, num: true }); i += m[0].length; continue; }
    if (s.startsWith('[[', i) || s.startsWith(']]', i) || s.startsWith('::', i)) { toks.push({ t: s.slice(i, i + 2), at: i, line }); i += 2; continue; }
    toks.push({ t: c, at: i, line }); i++;
  }
  return toks;
}

const BUILTINS = new Set(['thread_position_in_grid', 'thread_position_in_threadgroup', 'thread_index_in_threadgroup',
  'threadgroup_position_in_grid', 'threads_per_threadgroup', 'threadgroups_per_grid', 'threads_per_grid',
  'thread_index_in_simdgroup', 'simdgroup_index_in_threadgroup', 'threads_per_simdgroup', 'simdgroups_per_threadgroup',
  'thread_execution_width']);
export const VEC = /^(float|half|int|uint|short|ushort|char|uchar|long|ulong|bool)[234]$/;

function matchClose(toks, i, open, close) {
  let d = 0;
  for (; i < toks.length; i++) {
    if (toks[i].t === open) d++;
    else if (toks[i].t === close && --d === 0) return i;
  }
  throw new PrepassError(`unbalanced ${open}${close}`);
}

// Parses every `kernel void NAME(...) { ... }` of a file. Returns { kernels, edits } where edits turn the
// text into the emulator's C++ (positions in the original text, same line structure).
export function parse(src, file) {
  const toks = tokenize(src);
  const edits = [];
  const kernels = [];
  for (let i = 0; i < toks.length; i++) {
    if (toks[i].t !== 'kernel') continue;
    if (toks[i + 1]?.t !== 'void') fail(file, toks[i].line, `'kernel' must be followed by 'void'`);
    let maxThreads = 1024;
    // [[max_total_threads_per_threadgroup(N)]] right before `kernel`
    if (toks[i - 1]?.t === ']]') {
      const a0 = toks.slice(0, i).map((t) => t.t).lastIndexOf('[[');
      const attr = toks.slice(a0 + 1, i - 1).map((t) => t.t).join('');
      const m = /^max_total_threads_per_threadgroup\((\d+)\)$/.exec(attr);
      if (!m) fail(file, toks[i].line, `unsupported kernel attribute [[${attr}]]`);
      maxThreads = +m[1];
      edits.push({ from: toks[a0].at, to: toks[i - 1].at + 2, text: ' '.repeat(toks[i - 1].at + 2 - toks[a0].at) });
    }
    if (toks[i - 1]?.t === '>' || toks.slice(Math.max(0, i - 12), i).some((t) => t.t === 'template'))
      fail(file, toks[i].line, 'templated kernels are not supported: write one kernel per variant calling a template helper');
    const name = toks[i + 2].t;
    const lp = i + 3;
    if (toks[lp]?.t !== '(') fail(file, toks[i].line, `kernel ${name}: expected '('`);
    const rp = matchClose(toks, lp, '(', ')');
    const params = [];
    let cur = [], depth = 0;
    for (let j = lp + 1; j < rp; j++) {
      const t = toks[j].t;
      if (t === '(' || t === '[' || t === '<' || t === '[[') depth++;
      if (t === ')' || t === ']' || t === '>' || t === ']]') depth--;
      if (t === ',' && depth === 0) { params.push(cur); cur = []; } else cur.push(toks[j]);
    }
    if (cur.length) params.push(cur);
    const ps = params.map((p) => {
      const a0 = p.findIndex((t) => t.t === '[[');
      if (a0 < 0) fail(file, p[0].line, `kernel ${name}: every parameter needs an attribute ([[buffer(i)]], [[threadgroup(i)]] or a builtin)`);
      const a1 = p.findIndex((t) => t.t === ']]');
      const attr = p.slice(a0 + 1, a1).map((t) => t.t).join('');
      const before = p.slice(0, a0);
      const pname = before[before.length - 1].t;
      const type = src.slice(before[0].at, before[before.length - 1].at).trim();
      // Blanking is required, not cosmetic: `threadgroup` is a macro, [[threadgroup(0)]] would become [[(0)]].
      edits.push({ from: p[a0].at, to: p[a1].at + 2, text: ' '.repeat(p[a1].at + 2 - p[a0].at) });
      const line = p[0].line;
      let m;
      if ((m = /^buffer\((\d+)\)$/.exec(attr))) {
        const ref = type.endsWith('&');
        return { kind: 'buffer', index: +m[1], type, pname, line, ref,
          readonly: /\bconst\b/.test(type) || /^constant\b/.test(type), space: (/^(?:const\s+)?(device|constant|threadgroup|thread)\b/.exec(type) || [])[1] };
      }
      if ((m = /^threadgroup\((\d+)\)$/.exec(attr))) return { kind: 'tgmem', index: +m[1], type, pname, line, space: 'threadgroup' };
      if (BUILTINS.has(attr)) return { kind: 'builtin', attr, type, pname, line };
      fail(file, line, `kernel ${name}: unsupported attribute [[${attr}]]`);
    });
    const lb = rp + 1;
    if (toks[lb]?.t !== '{') fail(file, toks[rp].line, `kernel ${name}: expected a body`);
    const rb = matchClose(toks, lb, '{', '}');
    for (let j = lb + 1; j < rb; j++) {
      if (toks[j].t !== 'threadgroup') continue;
      const prev = toks[j - 1].t;
      if (!(prev === ';' || prev === '{' || prev === '}')) continue;  // only declarations at statement start
      let k = j + 1;
      while (toks[k].t !== ';' && toks[k].t !== '=') k++;
      const head = toks.slice(j + 1, k);
      const lb0 = head.findIndex((t) => t.t === '[');
      if (head.slice(0, lb0 < 0 ? head.length : lb0).some((t) => t.t === '*' || t.t === '&')) continue;  // a thread-local pointer/reference to threadgroup memory
      if (toks[k].t === '=') fail(file, toks[j].line, 'threadgroup variables cannot have initialisers');
      const decl = toks.slice(j + 1, k);
      let br = decl.findIndex((t) => t.t === '[');
      if (br < 0) br = decl.length;  // scalar: threadgroup T name;
      if (br < 2) fail(file, toks[j].line, 'threadgroup declaration must be `threadgroup T name[N];` or `threadgroup T name;`');
      const vname = decl[br - 1].t;
      const T = src.slice(decl[0].at, decl[br - 1].at).trim();
      const dims = br < decl.length ? src.slice(decl[br].at, toks[k].at).trim() : '';
      if (/,/.test(src.slice(decl[0].at, toks[k].at))) fail(file, toks[j].line, 'one threadgroup variable per declaration');
      edits.push({ from: toks[j].at, to: toks[k].at, text: `MSLEMU_TG_DECL(${T}, ${vname}, ${dims})` });
    }
    kernels.push({ name, line: toks[i].line, params: ps, maxThreads, file });
    i = rb;
  }
  for (let i = 0; i + 1 < toks.length; i++) {
    if (VEC.test(toks[i].t) && toks[i + 1].t === '(' && toks[i - 1]?.t !== '::' && toks[i - 1]?.t !== '.')
      edits.push({ from: toks[i].at, to: toks[i].at + toks[i].t.length, text: `::mslemu::vmake<${toks[i].t}>` });
  }
  return { kernels, edits, toks };
}

export const cstr = (s) => JSON.stringify(s);
// A kernel that takes bfloat needs MSL 3.1 (`bfloat`): it sits inside `#if defined(__HAVE_BFLOAT__)`, so the
// Metal 3.0 metallib lacks it and device.mm compiles its source at 3.1 (KernelInfo::bfloat).
export const usesBfloat = (kern) => kern.params.some((p) => /\bbfloat\b/.test(p.type));
export const bare = (type) => type.replace(/&\s*$/, '').trim();

// A file's text with its local #include "..." inlined (each once): newLibraryWithSource: cannot resolve includes.
export function inlineIncludes(file, seen = new Set()) {
  const abs = path.resolve(file);
  if (seen.has(abs)) return '';
  seen.add(abs);
  const text = fs.readFileSync(abs, 'utf8');
  return text.split('\n').map((l) => {
    const m = /^\s*#\s*include\s+"([^"]+)"/.exec(l);
    if (!m) return l;
    if (/^\s*#\s*pragma\s+once/.test(l)) return '';
    const inc = path.join(path.dirname(abs), m[1]);
    return `// ---- ${path.relative(ROOT, inc)}\n${inlineIncludes(inc, seen).replace(/^\s*#\s*pragma\s+once\s*$/m, '')}// ---- end ${path.relative(ROOT, inc)}`;
  }).join('\n');
}

export function metalFiles() {
  const dir = path.join(ROOT, 'metal');
  return fs.readdirSync(dir).filter((f) => f.endsWith('.metal')).sort().map((f) => path.join('metal', f));
}

const HOST_SCALARS = { uint: 'uint32_t', int: 'int32_t', float: 'float', ushort: 'uint16_t', short: 'int16_t', uchar: 'uint8_t', char: 'int8_t', bool: 'bool', ulong: 'uint64_t', long: 'int64_t' };
function hostType(type) {
  const t = bare(type).replace(/\b(constant|device|const)\b/g, '').trim();
  return HOST_SCALARS[t] || (t.startsWith('kargs::') ? t : `kargs::${t}`);
}

export function writeIfChanged(p, text) {
  if (fs.existsSync(p) && fs.readFileSync(p, 'utf8') === text) return;
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, text);
}

export function writeHeaders(outdir) {
  const files = metalFiles();
  const all = [];
  for (const f of files) all.push(...parse(fs.readFileSync(path.join(ROOT, f), 'utf8'), f).kernels);
  let k = `// Generated by scripts/msl-kernels.mjs from metal/*.metal: do not edit.\n#pragma once\n#include <cstdint>\n#include "${path.relative(outdir, path.join(ROOT, 'metal/shared/args.h'))}"\n#include "metal/kernel_info.h"\n`;
  k += `namespace tessera::mtl::gen {\nstatic const ParamInfo kParams[] = {\n`;
  let first = 0;
  const rows = [];
  for (const kern of all) {
    const ps = kern.params.filter((p) => p.kind !== 'builtin');
    for (const p of ps) k += `  {${p.kind === 'buffer' ? 'ParamKind::Buffer' : 'ParamKind::TgMem'}, ${p.index}, ${!!p.readonly}, ${p.kind === 'buffer' && p.ref ? `uint16_t(sizeof(${hostType(p.type)}))` : 0}},\n`;
    rows.push(`  {${cstr(kern.name)}, ${cstr(kern.file)}, ${kern.line}, ${kern.maxThreads}, ${first}, ${ps.length}, ${usesBfloat(kern)}}`);
    first += ps.length;
  }
  if (!first) k += '  {ParamKind::Buffer, 0, false, 0},\n';
  k += `};\nstatic const KernelInfo kKernels[] = {\n${rows.join(',\n')}\n};\nconstexpr int kKernelCount = ${all.length};\n}  // namespace tessera::mtl::gen\n`;
  writeIfChanged(path.join(outdir, 'kernels.gen.h'), k);
  // the argument structs for the op layer (native/ cannot name the repository root as an include dir)
  writeIfChanged(path.join(outdir, 'tessera_kargs.h'), `// Generated: forwards to metal/shared/args.h.\n#pragma once\n#include "${path.relative(outdir, path.join(ROOT, 'metal/shared/args.h'))}"\n`);
  let s = `// Generated by scripts/msl-kernels.mjs: each metal/*.metal with its local includes inlined.\n#pragma once\nnamespace tessera::mtl::gen {\nstruct Source { const char* file; const char* text; };\nstatic const Source kSources[] = {\n`;
  const hash = crypto.createHash('sha256');
  for (const f of files) {
    const text = inlineIncludes(path.join(ROOT, f));
    hash.update(f).update('\0').update(text).update('\0');
    writeIfChanged(path.join(outdir, 'src', path.basename(f)), text);
    // raw string literal in chunks (MSVC-style limits do not apply to clang/gcc, but keep lines short anyway)
    s += `  {${cstr(f)}, R"tessera_msl(${text})tessera_msl"},\n`;
  }
  const stamp = stampKernel(hash.digest('hex'));
  writeIfChanged(path.join(outdir, 'src', 'tessera_stamp.metal'),
    `// Generated by scripts/msl-kernels.mjs: names the sources this metallib was compiled from (native/metal/device.mm).\n#include <metal_stdlib>\nkernel void ${stamp}() {}\n`);
  s += `};\nconstexpr int kSourceCount = ${files.length};\nconstexpr const char* kStampKernel = ${cstr(stamp)};\n}  // namespace tessera::mtl::gen\n`;
  writeIfChanged(path.join(outdir, 'sources.gen.h'), s);
  return all;
}

// The stamp kernel's name for a hash of the sources.
export const stampKernel = (hex) => `tessera_sources_${hex.slice(0, 16)}`;

// Apple's compiler on each kernel file as it ships: Metal 3.0, every warning an error. The offline compiler
// keeps its default, fast math, as device.mm asks of the source compile.
export const METAL_COMPILE = ['-sdk', 'macosx', 'metal', '-std=metal3.0', '-Wall', '-Werror'];

// build/metal/src/*.metal -> .air -> one metallib at `out` (macOS with Xcode's Metal toolchain). ifToolchain:
// without the toolchain, an empty `out` and a warning instead of an error.
export function buildMetallib(outdir, out, { ifToolchain = false } = {}) {
  writeHeaders(outdir);
  if (ifToolchain && spawnSync('xcrun', ['-sdk', 'macosx', 'metal', '--version'], { encoding: 'utf8' }).status !== 0) {
    console.warn('msl-kernels: no Metal toolchain (xcrun metal); the kernels will be compiled at run time. Xcode 26: xcodebuild -downloadComponent MetalToolchain');
    fs.writeFileSync(out, '');
    return out;
  }
  const src = path.join(outdir, 'src'), air = path.join(outdir, 'air');
  fs.mkdirSync(air, { recursive: true });
  const airs = [];
  for (const f of fs.readdirSync(src).filter((x) => x.endsWith('.metal')).sort()) {
    const a = path.join(air, f.replace(/\.metal$/, '.air'));
    const r = spawnSync('xcrun', [...METAL_COMPILE, '-c', path.join(src, f), '-o', a], { encoding: 'utf8' });
    if (r.status !== 0) throw new PrepassError(`xcrun metal ${f} failed:\n${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
    airs.push(a);
  }
  const r = spawnSync('xcrun', ['-sdk', 'macosx', 'metallib', ...airs, '-o', out], { encoding: 'utf8' });
  if (r.status !== 0) throw new PrepassError(`xcrun metallib failed:\n${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
  return out;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [cmd, arg] = process.argv.slice(2);
  if (cmd === 'sources') {
    const list = (d) => fs.readdirSync(path.join(ROOT, d)).filter((f) => /\.(metal|h)$/.test(f)).map((f) => `${d}/${f}`);
    process.stdout.write([...list('metal'), ...list('metal/shared'), 'scripts/msl-kernels.mjs'].join(' '));
    process.exit(0);
  }
  if (cmd !== 'headers' && !(cmd === 'metallib' && arg)) {
    console.error('usage: msl-kernels.mjs headers [outdir] | metallib <out.metallib> | sources');
    process.exit(2);
  }
  const out = cmd === 'headers' ? path.resolve(arg || path.join(ROOT, 'build', 'metal')) : path.resolve(arg);
  try {
    if (cmd === 'headers') writeHeaders(out);
    else buildMetallib(path.join(ROOT, 'build', 'metal'), out, { ifToolchain: process.argv.includes('--if-toolchain') });
  } catch (e) {
    if (!(e instanceof PrepassError)) throw e;
    console.error(`msl-kernels: ${e.message}`);
    process.exit(1);
  }
  process.stdout.write(out);
}
