// The machine's f32 FMA peak (fma-peak.cc beside this file), for the bench pieces that state how
// close to the hardware they run (ort-peer, scaling).
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const out = fileURLToPath(new URL('../out', import.meta.url));

/** Builds fma-peak with the system C++ compiler; returns run(threads) → GFLOP/s, or null without a compiler. */
export function fmaPeak() {
  mkdirSync(out, { recursive: true });
  const bin = join(out, 'fma-peak');
  const cc = spawnSync('c++', ['-O2', '-std=c++17', '-pthread', join(here, 'fma-peak.cc'), '-o', bin], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0) return null;
  return (threads) => JSON.parse(spawnSync(bin, [String(threads)], { encoding: 'utf8' }).stdout.trim());
}
