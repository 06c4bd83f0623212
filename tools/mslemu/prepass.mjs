// mslemu pre-pass: turns MSL kernel files into what the emulator and the lint need. The kernel parser
// and the host headers live in scripts/msl-kernels.mjs (the product's build); this adds the emulator's
// C++ and the lint's textual rules. Node only, no dependencies.
//
//   node prepass.mjs run <in.metal> <out.cpp>   C++ for clang: #line to the .metal file, attributes blanked
//                                               (same columns), threadgroup declarations -> the poisoned
//                                               arena, `float4(` -> `::mslemu::vmake<float4>(` (MSL value
//                                               conversions), one trampoline + registration per kernel
//   node prepass.mjs lint <in.metal>...         textual rules clang cannot check (exit 1 with file:line)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrepassError, ROOT, VEC, bare, cstr, parse, writeIfChanged } from '../../scripts/msl-kernels.mjs';

export { PrepassError, ROOT, inlineIncludes, metalFiles, parse, tokenize, writeHeaders } from '../../scripts/msl-kernels.mjs';


// The emulator's C++ for one .metal file (run and lint modes share it; MSLEMU_LINT hides the trampolines).
export function generate(src, file) {
  const { kernels, edits } = parse(src, file);
  edits.sort((a, b) => b.from - a.from);
  let out = src;
  for (const e of edits) out = out.slice(0, e.from) + e.text + out.slice(e.to);
  let g = `#line 1 ${cstr(file)}\n${out}\n#ifndef MSLEMU_LINT\n#include "mslemu/invocation.h"\n`;
  for (const k of kernels) {
    const args = k.params.map((p) => {
      if (p.kind === 'buffer') {
        if (p.ref) return `*(${bare(p.type)}*)I.buffer(${p.index}, sizeof(${bare(p.type)}), alignof(${bare(p.type)}))`;
        return `(${p.type})I.buffer(${p.index}, 0, ::mslemu::pointee_align<${p.type}>())`;
      }
      if (p.kind === 'tgmem') return `(${p.type})I.tgmem(${p.index})`;
      return `::mslemu::builtin<${p.type}>(I.${p.attr}())`;
    });
    g += `static void mslemu_tramp_${k.name}(const ::mslemu::Invocation& I) {\n  ${k.name}(${args.join(',\n    ')});\n}\n`;
    const infos = k.params.filter((p) => p.kind !== 'builtin').map((p) =>
      `{${p.kind === 'buffer' ? 0 : 1}, ${p.index}, ${p.readonly ? 1 : 0}, ${p.kind === 'buffer' && p.ref ? `sizeof(${bare(p.type)})` : 0}}`);
    g += `static const ::mslemu::ParamInfo mslemu_params_${k.name}[] = {${infos.length ? infos.join(', ') : '{-1, -1, 0, 0}'}};\n`;
  }
  if (kernels.length) {
    g += `static ::mslemu::Registrar mslemu_registrar({\n`;
    g += kernels.map((k) => `  {${cstr(k.name)}, &mslemu_tramp_${k.name}, ${cstr(file)}, ${k.line}, mslemu_params_${k.name}, ${k.params.filter((p) => p.kind !== 'builtin').length}, ${k.maxThreads}}`).join(',\n');
    g += `\n});\n`;
  }
  g += `#endif\n`;
  return { code: g, kernels };
}

// Names that make an infinity or NaN a value, or test for one. Every kernel library is compiled with fast
// math (native/metal/device.mm), under which the compiler may assume no value is infinite or NaN: such a
// value is undefined behaviour and such a test may fold to false. metal/kernel_common.h has the finite
// sentinel to use instead (kNoScore).
const NON_FINITE = new Map([['INFINITY', 'an infinity'], ['NAN', 'a NaN'], ['HUGE_VALF', 'an infinity'], ['HUGE_VALH', 'an infinity'],
  ['isinf', 'a test for infinity'], ['isnan', 'a test for NaN']]);

// The fast-math rule alone, for any file under metal/ (the headers too). Comments are not tokens.
export function lintNonFinite(toks, file) {
  return toks.filter((t) => t.id && NON_FINITE.has(t.t))
    .map((t) => `${file}:${t.line}: '${t.t}': ${NON_FINITE.get(t.t)} under fast math (undefined or folded away): use a finite sentinel (metal/kernel_common.h)`);
}

// Rules clang's -fsyntax-only cannot see (lint mode). Returns a list of "file:line: message".
export function lintText(src, file) {
  const { kernels, toks } = parse(src, file);
  const errs = lintNonFinite(toks, file);
  const err = (line, msg) => errs.push(`${file}:${line}: ${msg}`);
  for (const k of kernels) {
    const seen = new Map();
    for (const p of k.params) {
      if (p.kind === 'builtin') continue;
      if (p.kind === 'buffer') {
        if ((p.type.includes('*') || p.ref) && !p.space) err(p.line, `kernel ${k.name}: parameter ${p.pname} needs an address space (device or constant)`);
        if (p.index > 30) err(p.line, `kernel ${k.name}: buffer index ${p.index} > 30`);
      }
      const key = `${p.kind}:${p.index}`;
      if (seen.has(key)) err(p.line, `kernel ${k.name}: ${p.kind === 'buffer' ? 'buffer' : 'threadgroup'} index ${p.index} used twice`);
      seen.set(key, true);
    }
  }
  const banned = new Map([['double', 'no double in MSL'], ['printf', 'no printf in kernels'], ['new', 'no dynamic allocation'],
    ['delete', 'no dynamic allocation'], ['std', 'no C++ standard library in kernels'], ['goto', 'no goto'], ['virtual', 'no virtual functions']]);
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i];
    if (t.id && banned.has(t.t) && toks[i - 1]?.t !== '.' && toks[i - 1]?.t !== '::') err(t.line, `'${t.t}': ${banned.get(t.t)}`);
    // float4 v(a, b, c, d): direct-init of a vector is a cast in clang, a constructor in MSL
    if (t.id && VEC.test(t.t) && toks[i + 1]?.id && toks[i + 2]?.t === '(' && !['operator'].includes(toks[i + 1].t)) {
      const prev = toks[i - 1]?.t;
      if (prev === ';' || prev === '{' || prev === '}' || prev === 'const' || prev === ')') err(t.line, `direct-initialised vector '${t.t} ${toks[i + 1].t}(...)': write '${t.t} ${toks[i + 1].t} = ${t.t}(...)'`);
    }
    // (device float*)p: clang lets a C-style cast change the address space silently
    if (t.t === '(' && ['device', 'threadgroup', 'constant', 'thread'].includes(toks[i + 1]?.t)) {
      let j = i + 1;
      while (j < toks.length && toks[j].t !== ')' && toks[j].t !== ';' && toks[j].t !== '(') j++;
      if (toks[j]?.t === ')' && toks[j - 1]?.t === '*') err(t.line, `C-style cast to an address-space pointer type (clang lets it change the address space silently): use reinterpret_cast, which refuses that`);
    }
    if (t.t === 'host_name') err(t.line, 'template kernels ([[host_name]]) are not supported by mslemu');
  }
  src.split('\n').forEach((l, i) => {
    if (/^\s*#\s*define\b/.test(l) && /\bkernel\s+void\b/.test(l)) err(i + 1, 'kernels must not be defined by macros (the pre-pass cannot see them)');
  });
  return errs;
}

function main(argv) {
  const [cmd, ...rest] = argv;
  if (cmd === 'run') {
    const [inPath, outPath] = rest;
    const rel = path.relative(ROOT, path.resolve(inPath));
    const { code, kernels } = generate(fs.readFileSync(inPath, 'utf8'), rel);
    writeIfChanged(outPath, code);
    console.log(`${rel}: ${kernels.length} kernel(s)`);
  } else if (cmd === 'lint') {
    const errs = rest.flatMap((f) => lintText(fs.readFileSync(f, 'utf8'), path.relative(ROOT, path.resolve(f))));
    for (const e of errs) console.error(`${e} [mslemu lint]`);
    process.exit(errs.length ? 1 : 0);
  } else {
    console.error('usage: prepass.mjs run <in.metal> <out.cpp> | lint <file.metal>...');
    process.exit(2);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try { main(process.argv.slice(2)); } catch (e) {
    if (e instanceof PrepassError) { console.error(`prepass: ${e.message}`); process.exit(1); }
    throw e;
  }
}
