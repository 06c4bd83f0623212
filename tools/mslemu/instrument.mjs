// mslemu's counters (docs/metal-on-linux.md#counters): rewrites the LLVM IR of one prepassed kernel file,
// compiled at -O2 (so the counts are of optimised code, and the counting cannot change the optimisation),
// so that every GPU thread counts what it does:
//   - every load and store (and constant-length memcpy / memset) calls mslemu_count_ld / mslemu_count_st
//     with its address and size; the runtime keeps those that fall in a bound device buffer or in the
//     group's threadgroup memory, and drops the lane's own stack (registers) and setBytes arguments;
//   - every basic block adds its static operation counts to the thread-local mslemu_ops[3]:
//       [0] scalar FMAs: llvm.fma / llvm.fmuladd, and an fmul that an fadd/fsub of the same block consumes
//           (the Metal compiler contracts a*b+c by default; the emulator's kernels are built without contraction)
//       [1] other ALU ops: float and integer arithmetic, compares, selects, min/max/abs/floor..., conversions
//           between int and float (address arithmetic in getelementptr and casts that are free are not counted)
//       [2] special functions: exp, log, tanh, sqrt, sin, cos, pow, division
//     Vector operations count one per element.
// The shim's collective bodies (metal::detail::matops / mixed_mad / simd_ops, namespace mslemu) run once per SIMD-group on
// the scheduler's stack: their memory accesses are counted (a simdgroup_load reads its 8x8 once for the whole
// SIMD-group, as the hardware does) but not their arithmetic (simdgroup multiply-accumulates are counted by
// the shim itself, mslemu::count_mma).
//
//   node instrument.mjs <in.ll> <out.ll>
import fs from 'node:fs';

const SCALAR = { half: 2, bfloat: 2, float: 4, double: 8, ptr: 8, i1: 1, i8: 1, i16: 2, i32: 4, i64: 8, i128: 16 };

/** Bytes of an IR type written at the start of `s` ("float", "<4 x float>", "[2 x i32]", "{ float, i32 }"); 0 when unknown. */
export function typeSize(t) {
  t = t.trim();
  if (SCALAR[t] !== undefined) return SCALAR[t];
  let m = /^<(\d+) x (.+)>$/.exec(t);
  if (m) return Number(m[1]) * typeSize(m[2]);
  m = /^\[(\d+) x (.+)\]$/.exec(t);
  if (m) return Number(m[1]) * typeSize(m[2]);
  m = /^\{(.*)\}$/.exec(t);
  if (m) return splitTop(m[1]).reduce((a, f) => a + typeSize(f), 0);  // packed layout: a lower bound, fine for counting
  return 0;
}
function splitTop(s) {
  const out = [];
  let depth = 0, cur = '';
  for (const c of s) {
    if ('<[{('.includes(c)) depth++;
    if ('>]})'.includes(c)) depth--;
    if (c === ',' && depth === 0) { out.push(cur); cur = ''; } else cur += c;
  }
  if (cur.trim()) out.push(cur);
  return out;
}
// The element count of a result type ("<4 x float>" -> 4).
const lanes = (t) => { const m = /^<(\d+) x /.exec(t.trim()); return m ? Number(m[1]) : 1; };

const ALU_OPS = new Set(['fadd', 'fsub', 'fmul', 'fneg', 'fcmp', 'icmp', 'add', 'sub', 'mul', 'shl', 'lshr', 'ashr', 'and', 'or',
  'xor', 'select', 'sitofp', 'uitofp', 'fptosi', 'fptoui', 'fpext', 'fptrunc']);
const SPECIAL_OPS = new Set(['fdiv', 'frem', 'udiv', 'sdiv', 'urem', 'srem']);
const ALU_CALLS = /^@llvm\.(maxnum|minnum|maximum|minimum|fabs|floor|ceil|trunc|rint|nearbyint|round|roundeven|copysign|smax|smin|umax|umin|abs|ctpop|ctlz|cttz)\./;
const SPECIAL_CALLS = /^@(llvm\.(exp|exp2|log|log2|log10|sqrt|sin|cos|pow|powi|tanh)\.|(expf|exp2f|exp10f|logf|log2f|log10f|sqrtf|sinf|cosf|tanf|tanhf|powf|asinf|acosf|atanf|atan2f|sinhf|coshf|fmodf)$)/;
const FMA_CALLS = /^@llvm\.(fma|fmuladd)\./;
// Functions whose arithmetic is the emulator's, not the kernel's.
const SKIP_ALU = /^@"?(_ZN5metal6detail6matops|_ZN5metal6detail9mixed_mad|_ZN5metal6detail8simd_ops|_ZN6mslemu|_ZNK?St|_ZSt)/;

export function instrument(ir) {
  const lines = ir.split('\n');
  const out = [];
  let fn = null;        // current function name, null outside one
  let block = null;     // { ops lines, insertAt index in out, counts }
  let uid = 0;
  const flush = () => {
    if (!block || fn === null || SKIP_ALU.test(fn)) { block = null; return; }
    const [fma, alu, special] = countBlock(block.body);
    const add = [];
    [fma, alu, special].forEach((n, i) => {
      if (!n) return;
      const g = `getelementptr inbounds ([3 x i64], ptr @mslemu_ops, i64 0, i64 ${i})`;
      const a = `%mslemu.${uid++}`, b = `%mslemu.${uid++}`;
      add.push(`  ${a} = load i64, ptr ${g}, align 8`, `  ${b} = add i64 ${a}, ${n}`, `  store i64 ${b}, ptr ${g}, align 8`);
    });
    if (add.length) out.splice(block.insertAt, 0, ...add);
    block = null;
  };
  for (const line of lines) {
    if (fn === null) {
      const m = /^define [^@]*(@[^\s(]+)\(/.exec(line);
      out.push(line);
      if (m && line.trimEnd().endsWith('{')) {
        fn = m[1];
        block = { insertAt: out.length, body: [] };
      }
      continue;
    }
    if (line === '}') {
      flush();
      fn = null;
      out.push(line);
      continue;
    }
    if (/^[\w.$"-]+:/.test(line)) {  // a block label
      flush();
      out.push(line);
      block = { insertAt: out.length, body: [] };
      continue;
    }
    if (block && /^\s+%[\w.$"-]+ = (phi|landingpad) /.test(line)) {
      out.push(line);
      block.insertAt = out.length;  // counters go after the phis
      continue;
    }
    if (block) block.body.push(line);
    // memory accesses
    let m = /^\s+%[\w.$"-]+ = load (?:atomic )?(?:volatile )?(.+?), ptr (%[\w.$"-]+)/.exec(line);
    if (m) {
      const n = typeSize(m[1]);
      if (n) out.push(`  call void @mslemu_count_ld(ptr ${m[2]}, i64 ${n})`);
      out.push(line);
      continue;
    }
    m = /^\s+store (?:atomic )?(?:volatile )?(.*), ptr (%[\w.$"-]+)(,|$)/.exec(line);
    if (m) {
      const ty = /^(<[^>]*>|\[[^\]]*\]|\{[^}]*\}|\S+)/.exec(m[1].trim());
      const n = ty ? typeSize(ty[1]) : 0;
      out.push(line);
      if (n) out.push(`  call void @mslemu_count_st(ptr ${m[2]}, i64 ${n})`);
      continue;
    }
    m = /call void @llvm\.(memcpy|memmove|memset)\.[\w.]+\(ptr [^%]*(%[\w.$"-]+), (?:ptr [^%]*(%[\w.$"-]+)|i8 [^,]+), i64 (\d+)/.exec(line);
    if (m) {
      out.push(line);
      out.push(`  call void @mslemu_count_st(ptr ${m[2]}, i64 ${m[4]})`);
      if (m[3]) out.push(`  call void @mslemu_count_ld(ptr ${m[3]}, i64 ${m[4]})`);
      continue;
    }
    out.push(line);
  }
  out.push('declare void @mslemu_count_ld(ptr, i64) #0', 'declare void @mslemu_count_st(ptr, i64) #0');
  out.push('@mslemu_ops = external thread_local(initialexec) global [3 x i64], align 8');
  // #0 may already exist: give ours a fresh attribute group number
  const used = [...ir.matchAll(/^attributes #(\d+)/gm)].map((x) => Number(x[1]));
  const attr = used.length ? Math.max(...used) + 1 : 0;
  const text = out.join('\n').replace(/declare void @mslemu_count_(ld|st)\(ptr, i64\) #0/g, `declare void @mslemu_count_$1(ptr, i64) #${attr}`);
  return `${text}\nattributes #${attr} = { nounwind }\n`;
}

// [fma, alu, special] of one block's instructions.
function countBlock(body) {
  let fma = 0, alu = 0, special = 0;
  const fmuls = new Map();  // result name -> lanes, unpaired
  for (const l of body) {
    const m = /^\s+(%[\w.$"-]+) = (\w+) (?:(?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc|nuw|nsw|exact|disjoint|nneg) )*(.*)$/.exec(l);
    if (!m) continue;
    const [, res, op, rest] = m;
    if (op === 'call' || op === 'tail') {
      const c = /(?:call )?(?:fast |nnan |ninf |nsz |arcp |contract |afn |reassoc |noundef |nofpclass\([^)]*\) )*(<[^>]*>|\S+) (@[\w.$"-]+)\(/.exec(rest);
      if (!c) continue;
      const n = lanes(c[1]);
      if (FMA_CALLS.test(c[2])) fma += n;
      else if (SPECIAL_CALLS.test(c[2])) special += n;
      else if (ALU_CALLS.test(c[2])) alu += n;
      continue;
    }
    if (op === 'fmul') {
      fmuls.set(res, lanes(/^(<[^>]*>|\S+)/.exec(rest)[1]));
      continue;
    }
    const ty = /^(<[^>]*>|\S+)/.exec(rest);
    const n = ty ? lanes(ty[1]) : 1;
    if ((op === 'fadd' || op === 'fsub') && fmuls.size) {
      const operands = rest.slice(ty[1].length).split(',').map((s) => s.trim());
      const pair = operands.find((o) => fmuls.has(o));
      if (pair) {
        fmuls.delete(pair);
        fma += n;
        continue;
      }
    }
    if (ALU_OPS.has(op)) alu += n;
    else if (SPECIAL_OPS.has(op)) special += n;
  }
  for (const n of fmuls.values()) alu += n;
  return [fma, alu, special];
}

if (process.argv[1] && process.argv[1].endsWith('instrument.mjs')) {
  const [inPath, outPath] = process.argv.slice(2);
  fs.writeFileSync(outPath, instrument(fs.readFileSync(inPath, 'utf8')));
}
