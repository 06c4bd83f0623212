#!/usr/bin/env node
// Writes a synthetic real-size Qwen3.5 vision tower (27 blocks, hidden 1152, 16 heads, MLP 4304,
// out 3584; random bf16 weights, src/synthetic.ts) as an HF checkpoint folder, for benchmarks.
// Never committed:
//   node bench/make-synthetic-qwen.mjs [outdir]     (default bench/out/qwen3_5-synthetic)
// Needs the compiled TypeScript (dist/, made by npm install or npm run build:ts).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { QWEN3_5_LARGE, writeQwenFolder } from '../dist/synthetic.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const defaultOut = join(root, 'bench', 'out', 'qwen3_5-synthetic');

/** `overrides` changes the tower's size (e.g. { depth: 4 } for a block-stack bench); same seeds otherwise. */
export function makeSyntheticQwen(dir = defaultOut, overrides = {}) {
  if (!existsSync(join(dir, 'model.safetensors'))) writeQwenFolder(dir, { ...QWEN3_5_LARGE, ...overrides });
  return dir;
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(makeSyntheticQwen(process.argv[2]));
