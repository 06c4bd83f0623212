// Bench piece: the AVX2 GEMM micro-kernel's k loop on cores this project has no machine of, by llvm-mca's
// scheduling models (a model, not a measurement: docs/cpu.md#the-k-loops-own-cost). The kernels are
// compiled as the addon compiles them (g++, binding.gyp's flags); the innermost loop of each micro-kernel
// is taken from the object's disassembly and llvm-mca reports its cycles per iteration on each core's
// model, next to the same count of FMAs alone (the FMA bound). These cores fuse a compare with the branch
// after it; llvm-mca would issue them as two ops, so the compare is left out.
//
//   npm run bench -- cpu-loop-model                 (writes its section of BENCHMARKS.md)
//   node bench/pieces/cpu-loop-model.mjs [--src DIR]   (prints the table for another checkout, e.g. an older one)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonCxxFlags } from '../../scripts/sources.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CXX = process.env['CXX'] ?? 'g++';
const ITERATIONS = 1000;

// The micro-kernels modelled: gemm_micro_t<V256<unpack>, MR, NV, dtype, LDA> with MR = LDA (the full
// tile, whatever kernels_avx2.cc makes it), dtype in DType's order (F32 0, F16 1, BF16 2).
const LOOPS = [
  { name: 'bf16, shift and mask (AMD, others)', unpack: false, dtype: 2 },
  { name: 'bf16, unpacks (Intel)', unpack: true, dtype: 2 },
  { name: 'f32 (for comparison: no widening, twice the bytes)', unpack: false, dtype: 0 },
];
const MICRO = /gemm_micro_t<tessera::cpu::\(anonymous namespace\)::V256<(true|false)>, (\d+), (\d+), (\d), (\d+)>\(/;

/** The full tile's function name for a loop of LOOPS, and its rows and vectors, from the disassembly. */
export function fullTile(disassembly, { unpack, dtype }) {
  for (const line of disassembly.split('\n')) {
    const m = line.endsWith('>:') ? MICRO.exec(line) : null;
    if (m && m[1] === String(unpack) && Number(m[4]) === dtype && m[2] === m[5])
      return { sym: m[0], rows: Number(m[2]), vectors: Number(m[3]) };
  }
  throw new Error(`no full-tile micro-kernel V256<${unpack}> of dtype ${dtype} in the object`);
}

// Cores with AVX2 and no AVX-512 (or whose AVX2 path matters), by llvm-mca's model names, and Zen 5, the one
// core here to hold a model against. Skylake-class client cores rename 4 ops a cycle; LLVM's model lets 6
// through, so it is held to 4 here.
const CORES = [
  { name: 'Haswell / Broadwell', cpu: 'haswell' },
  { name: 'Skylake to Comet Lake (most Intel Macs)', cpu: 'skylake', args: ['-dispatch=4'] },
  { name: 'Golden Cove (Alder Lake P, Sapphire Rapids)', cpu: 'alderlake' },
  { name: 'Zen 1 (EPYC 7001)', cpu: 'znver1' },
  { name: 'Zen 2 (EPYC 7002)', cpu: 'znver2' },
  { name: 'Zen 3 (EPYC 7003)', cpu: 'znver3' },
  { name: 'Zen 5 (the one measured here)', cpu: 'znver5' },
];

function run(cmd, args, input) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', input, maxBuffer: 1 << 26 });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr.slice(0, 2000)}`);
  return r.stdout;
}

// The oldest llvm-mca whose scheduling models include every core of CORES (znver5 came with LLVM 19).
export const MCA_MIN_MAJOR = 19;

/** An llvm-mca on PATH that knows every core of CORES, or null (an older one, as Debian 12's llvm-14, is passed over). */
export function findMca() {
  for (const c of ['llvm-mca-19', 'llvm-mca']) {
    const r = spawnSync(c, ['--version'], { encoding: 'utf8' });
    if (r.error) continue;
    const major = Number(/LLVM version (\d+)/.exec(r.stdout ?? '')?.[1] ?? 0);
    if (major >= MCA_MIN_MAJOR) return c;
  }
  return null;
}

/** The innermost loop with the most FMAs per instruction in the function whose name contains `sym`. */
export function hotLoop(disassembly, sym) {
  const lines = disassembly.split('\n');
  const start = lines.findIndex((l) => l.endsWith('>:') && l.includes(sym));
  if (start < 0) throw new Error(`no function ${sym} in the object`);
  const body = [];
  for (let i = start + 1; i < lines.length && !lines[i].endsWith('>:'); ++i) {
    const m = /^\s*([0-9a-f]+):\t(.*)$/.exec(lines[i]);
    if (m) body.push({ addr: parseInt(m[1], 16), text: m[2].replace(/\s+<.*>$/, '').trim() });
  }
  const loops = [];
  for (const ins of body) {
    const m = /^j\w+\s+([0-9a-f]+)$/.exec(ins.text);
    if (!m || parseInt(m[1], 16) >= ins.addr) continue;
    const seg = body.filter((x) => x.addr >= parseInt(m[1], 16) && x.addr <= ins.addr);
    const fmas = seg.filter((x) => /^vfmadd/.test(x.text)).length;
    if (fmas) loops.push({ from: seg[0].addr, to: ins.addr, seg, fmas });
  }
  const inner = loops.filter((a) => !loops.some((b) => b !== a && b.from >= a.from && b.to <= a.to));
  if (!inner.length) throw new Error(`no FMA loop in ${sym}`);
  return inner.sort((a, b) => b.fmas / b.seg.length - a.fmas / a.seg.length)[0];
}

/** The loop as llvm-mca input: the branch to a label, the compare before it left out (fused with it). */
export function mcaInput(loop) {
  const out = ['L1:'];
  loop.seg.forEach((x, i) => {
    const next = loop.seg[i + 1];
    if (next && /^j/.test(next.text) && /^(cmp|test)/.test(x.text)) return;
    out.push(/^j\w+\s/.test(x.text) ? x.text.replace(/\s+[0-9a-f]+$/, ' L1') : x.text);
  });
  return out.join('\n') + '\n';
}

function cycles(mca, asm, core) {
  const text = run(mca, ['-mtriple=x86_64', `-mcpu=${core.cpu}`, `-iterations=${ITERATIONS}`, ...(core.args ?? [])], asm);
  const m = /Total Cycles:\s+(\d+)/.exec(text);
  if (!m) throw new Error(`llvm-mca gave no cycle count for ${core.cpu}`);
  return Number(m[1]) / ITERATIONS;
}

/** Each micro-kernel's hot loop, compiled from the checkout at srcRoot: { name, tile, steps (k steps a pass), loop, asm }. */
export function kernelLoops(srcRoot = ROOT) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-loop-model-'));
  try {
    const obj = join(dir, 'kernels_avx2.o');
    run(CXX, [...addonCxxFlags(), '-I', join(srcRoot, 'native'), '-c', join(srcRoot, 'native', 'cpu', 'kernels_avx2.cc'), '-o', obj]);
    const dis = run('objdump', ['-d', '--no-show-raw-insn', '-C', obj]);
    return LOOPS.map((l) => {
      const tile = fullTile(dis, l);
      const loop = hotLoop(dis, tile.sym);
      return { name: l.name, tile, steps: loop.fmas / (tile.rows * tile.vectors), loop, asm: mcaInput(loop) };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Per loop and core: cycles per k step, and the FMA bound's share of them. */
export function model(srcRoot = ROOT) {
  const mca = findMca();
  if (!mca) throw new Error(`cpu-loop-model needs llvm-mca ${MCA_MIN_MAJOR} or later (Debian: llvm-19)`);
  return kernelLoops(srcRoot).map((l) => {
    const fmas = Array.from({ length: l.loop.fmas }, (_, i) => `vfmadd231ps %ymm0, %ymm1, %ymm${2 + (i % 14)}`);
    const fmaOnly = `L1:\n${fmas.join('\n')}\njne L1\n`;
    return {
      name: l.name, tile: l.tile, steps: l.steps,
      cores: CORES.map((c) => {
        const perStep = cycles(mca, l.asm, c) / l.steps;
        return { ...c, perStep, ofBound: cycles(mca, fmaOnly, c) / l.steps / perStep };
      }),
    };
  });
}

export function table(rows) {
  const lines = [
    `| micro-kernel (${rows[0].tile.rows} × ${8 * rows[0].tile.vectors}, AVX2) | k steps a loop pass | ${CORES.map((c) => c.name).join(' | ')} |`,
    `| --- | --- | ${CORES.map(() => '---').join(' | ')} |`,
  ];
  for (const r of rows)
    lines.push(`| ${r.name} | ${r.steps} | ${r.cores.map((c) => `${c.perStep.toFixed(2)} (${Math.round(100 * c.ofBound)} %)`).join(' | ')} |`);
  return lines.join('\n');
}

export async function section() {
  const rows = model();
  const version = run(findMca(), ['--version']).match(/LLVM version ([\d.]+)/)?.[1] ?? '?';
  const body = [
    `**A model, not a measurement.** Cycles per k step of the AVX2 GEMM micro-kernel's inner loop (${rows[0].tile.rows * rows[0].tile.vectors} FMAs a step) by llvm-mca ${version}'s scheduling model of each core, and in brackets the FMA bound's share of them (the same number of FMAs alone on the same model: 100 % = the loop issues as fast as its FMAs). Compiled by ${CXX} with the addon's flags (binding.gyp), the loop taken from the object. llvm-mca models ports, latencies and the issue width; it does not model the caches (operands are taken to be in L1), and its models of these cores are LLVM's, not checked by this project on the hardware. A fused compare-and-branch is counted as one op. Skylake is held to 4 ops a cycle (its rename width). The Zen 5 column is the check: LLVM's Zen models issue a 256-bit broadcast from memory to the FP1/FP2 pipes (FP1 also does FMAs), which caps the bf16 loops at 92 % there, while on this project's Zen 5 the same shift-and-mask tile measured 97 % of the AVX2 FMA peak with its operands in L1 (docs/cpu.md#avx2-16-ymm-registers): on that core at least, the AMD models are pessimistic. Why the loop is written as it is: docs/cpu.md#the-k-loops-own-cost.`,
    '',
    table(rows),
  ];
  return { title: 'CPU micro-kernel loops on cores without a machine here (llvm-mca, a model)', body: body.join('\n') };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf('--src');
  console.log(table(model(at > 0 ? resolve(process.argv[at + 1]) : ROOT)));
}
