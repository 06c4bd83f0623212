// Builds and runs bench/kernels/cpu_kernels.cc (the CPU backend's ops at real Qwen3.5 tower shapes,
// GFLOP/s per op and SIMD level). Not part of npm test. Arguments go to the benchmark:
//   node bench/kernels/run.mjs [--threads T] [--simd avx512] [--rows 1120,4096] [--reps 3] [--dtype bf16]
//                                  [--simd amx --precision bf16]   (precision bf16: docs/bf16.md)
// With --widening-ab first, it builds and runs bench/kernels/widening_ab.cc instead: the two
// AVX2 bf16 widenings taking turns in one process (see that file for its options).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonCxxFlags } from '../../scripts/sources.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const sources = [];
for (const dir of ['native/common', 'native/backend', 'native/cpu'])
  for (const f of readdirSync(join(root, dir)).sort()) if (f.endsWith('.cc')) sources.push(join(dir, f));
const ab = process.argv[2] === '--widening-ab';
sources.push(`bench/kernels/${ab ? 'widening_ab' : 'cpu_kernels'}.cc`);
mkdirSync(join(root, 'build'), { recursive: true });
const exe = join(root, 'build', ab ? 'bench-widening-ab' : 'bench-kernels');
// binding.gyp's flags (no -march: kernels pick their ISA at run time).
execFileSync('g++', [...addonCxxFlags(), '-Inative', ...sources, '-lpthread', '-o', exe], {
  cwd: root,
  stdio: 'inherit',
});
execFileSync(exe, process.argv.slice(ab ? 3 : 2), { stdio: 'inherit' });
console.log(`(built ${relative(root, exe)})`);
