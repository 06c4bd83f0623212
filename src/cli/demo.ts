// The demo tower `tessera encode` runs without --model: a tiny Qwen3.5-shaped tower (2 blocks,
// hidden 64) with RANDOM weights, generated deterministically on first use into the user's cache
// folder (userCacheDir; the temp folder when that cannot be written), never into the package: inside
// a packaged app (Electron's asar, a read-only install) the package folder cannot be written. It
// exercises the whole pipeline — decode, PIL-exact preprocessing, the tower, the output file — but its
// embeddings mean nothing.
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
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

/**
 * The user's cache folder, where each system keeps what can be made again: %LOCALAPPDATA% on
 * Windows, ~/Library/Caches on macOS, $XDG_CACHE_HOME or ~/.cache elsewhere (the XDG base directory
 * spec; a relative XDG_CACHE_HOME is ignored, as the spec says).
 */
export function userCacheDir(env: Record<string, string | undefined> = process.env, platform: NodeJS.Platform = process.platform, home = homedir()): string {
  if (platform === 'win32') return env['LOCALAPPDATA'] || join(home, 'AppData', 'Local');
  if (platform === 'darwin') return join(home, 'Library', 'Caches');
  const xdg = env['XDG_CACHE_HOME'];
  return xdg && xdg.startsWith('/') ? xdg : join(home, '.cache');
}

/** The demo tower's folder, generated on first use: under the user's cache folder, else the temp folder. */
export async function demoTowerPath(env: Record<string, string | undefined> = process.env): Promise<string> {
  const candidates = [join(userCacheDir(env), 'tessera-vision', tesseraVersion(), DEMO_NAME), join(tmpdir(), `tessera-demo-${tesseraVersion()}`, DEMO_NAME)];
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
      last = e; // a cache folder that cannot be written: try the temp folder
    }
  }
  throw last;
}
