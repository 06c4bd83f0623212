// The demo tower `tessera encode` runs without --model: a tiny Qwen3.5-shaped tower (2 blocks,
// hidden 64) with RANDOM weights, generated deterministically on first use into <package>/demo/
// (or the temp folder when the package folder is read-only). It exercises the whole pipeline —
// decode, PIL-exact preprocessing, the tower, the output file — but its embeddings mean nothing.
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';
import { writeQwenFolder, type QwenVisionSize } from '../synthetic.js';
import { tesseraVersion } from '../version.js';

export const DEMO_NAME = 'qwen3_5-random';
const VISION: QwenVisionSize = { depth: 2, hidden_size: 64, num_heads: 4, intermediate_size: 128, out_hidden_size: 64 };
// Budget capped at 1 MP (real checkpoints: 16 MP) so that the demo answers in a moment.
const BUDGET = { minPixels: 65536, maxPixels: 1048576 };

export const DEMO_NOTICE =
  'note: no --model given: using the built-in demo tower (Qwen3.5-shaped, 2 blocks, hidden 64) whose weights are RANDOM; ' +
  'its embeddings mean nothing. Pass --model <path> to encode with a real checkpoint.';

async function generate(dir: string): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  writeQwenFolder(tmp, VISION, BUDGET, { tessera_demo: 'RANDOM weights: a demo of the pipeline, not a model' });
  try {
    await rename(tmp, dir);
  } catch (e) {
    // Another process generated it first: use theirs.
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, 'model.safetensors'))) throw e;
  }
}

/** The demo tower's folder, generated on first use. */
export async function demoTowerPath(): Promise<string> {
  const candidates = [join(packageRoot(), 'demo', DEMO_NAME), join(tmpdir(), `tessera-demo-${tesseraVersion()}`, DEMO_NAME)];
  for (const dir of candidates) {
    if (existsSync(join(dir, 'model.safetensors'))) return dir;
  }
  let last: unknown;
  for (const dir of candidates) {
    try {
      await mkdir(join(dir, '..'), { recursive: true });
      await generate(dir);
      return dir;
    } catch (e) {
      last = e; // read-only package folder: try the temp folder
    }
  }
  throw last;
}
