// The machine's f32 FMA peak (fma-peak.cc beside this file), for the bench pieces that state how
// close to the hardware they run (ort-peer, scaling), per ISA: an engine held to AVX2 on an AVX-512
// host is measured against the AVX2 peak.
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const out = fileURLToPath(new URL('../../out', import.meta.url));

/**
 * Builds fma-peak with the system C++ compiler; returns run(threads, isa?) → { threads, isa, gflops }
 * (isa: avx512 | avx2 | neon, default the widest this CPU has, or a bf16 unit: avx512-bf16 | amx |
 * neon-bf16; gflops null where it lacks that ISA),
 * or null without a compiler.
 */
export function fmaPeak() {
  mkdirSync(out, { recursive: true });
  const bin = join(out, 'fma-peak');
  const cc = spawnSync('c++', ['-O2', '-std=c++17', '-pthread', join(here, 'fma-peak.cc'), '-o', bin], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0) return null;
  // A peak is a maximum: the best of 3 one-second readings, so that a busy second on this shared
  // machine does not read as a lower ceiling (which would put engines above 100 % of it).
  const once = (threads, isa) => JSON.parse(spawnSync(bin, [String(threads), '1', ...(isa ? [isa] : [])], { encoding: 'utf8' }).stdout.trim());
  return (threads, isa) => [once(threads, isa), once(threads, isa), once(threads, isa)].reduce((a, b) => ((b.gflops ?? 0) > (a.gflops ?? 0) ? b : a));
}
