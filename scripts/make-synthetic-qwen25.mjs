#!/usr/bin/env node
// Writes a synthetic Qwen2.5-VL-7B-shaped vision tower (32 blocks, hidden 1280, 16 heads, MLP 3420, window 112,
// full attention at 7/15/23/31, out 3584; random bf16 weights, src/synthetic.ts) as an HF checkpoint folder, for
// benchmarks. Never committed:
//   node scripts/make-synthetic-qwen25.mjs [outdir]     (default scripts/bench/out/qwen2_5_vl-synthetic)
// Needs the compiled TypeScript (dist/, made by npm install or npm run build:ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { QWEN2_5_VL_7B, writeQwen25Folder } from '../dist/synthetic.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const defaultOut = join(root, 'scripts', 'bench', 'out', 'qwen2_5_vl-synthetic');

/** `overrides` changes the tower's size (e.g. { depth: 8, fullatt_block_indexes: [7] }); same seeds otherwise. */
export function makeSyntheticQwen25(dir = defaultOut, overrides = {}) {
  if (!existsSync(join(dir, 'model.safetensors'))) writeQwen25Folder(dir, { ...QWEN2_5_VL_7B, ...overrides });
  return dir;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(makeSyntheticQwen25(process.argv[2]));
