// Where tessera runs: encoding keeps the event loop free (the work is on a worker thread of the
// addon), and the addon is context-aware: it loads and encodes inside worker_threads too, next to
// the main thread's own instance (what Electron's utility processes need as well).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { FIXTURES, readTensors, relErr } from './helpers/fixtures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MODEL = join(FIXTURES, 'qwen3_vl-tiny', 'model');
const CASE = join(FIXTURES, 'qwen3_vl-tiny', 'expected', 'coffee.safetensors');

beforeAll(() => {
  // Workers load the package as installed (dist/): compile the current sources first.
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')]);
});

describe('runtime', () => {
  it('the event loop keeps turning while an encode runs', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const pixels = new Float32Array(4096 * 1536).map((_, i) => Math.sin(i * 0.001));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const started = performance.now();
    await tower.encodePixels({ pixelValues: pixels, grid: { t: 1, h: 64, w: 64 } });
    const elapsed = performance.now() - started;
    clearInterval(timer);
    await tower.close();
    // A blocked loop would tick at most once, at the end; a free one ticks throughout. (No speed is
    // asserted: only that the timer ran several times while the encode was in flight.)
    expect(elapsed).toBeGreaterThan(20);
    expect(ticks).toBeGreaterThanOrEqual(3);
  });

  it('loads and encodes in two worker_threads at once, equal to the main thread and HF', async () => {
    const ref = readTensors(CASE);
    const pixels = ref['pixel_values']!.f32();
    const main = await VisionTower.open(MODEL, { backend: 'cpu' });
    const expected = (await main.encodePixels({ pixelValues: pixels, grid: { t: 1, h: 8, w: 12 } })).embeddings;
    await main.close();
    expect(relErr(expected, ref['merged']!.f32())).toBeLessThan(1e-4);

    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(workerData.entry).then(async ({ VisionTower }) => {
        const tower = await VisionTower.open(workerData.model, { backend: 'cpu' });
        const r = await tower.encodePixels({ pixelValues: workerData.pixels, grid: { t: 1, h: 8, w: 12 } });
        await tower.close();
        parentPort.postMessage(r.embeddings);
      }, (e) => parentPort.postMessage({ error: String(e) }));`;
    const run = () =>
      new Promise<Float32Array>((resolve, reject) => {
        const w = new Worker(code, {
          eval: true,
          workerData: { entry: join(ROOT, 'dist', 'index.js'), model: MODEL, pixels },
        });
        w.once('message', (m) => (m instanceof Float32Array ? resolve(m) : reject(new Error(m.error))));
        w.once('error', reject);
      });
    const [a, b] = await Promise.all([run(), run()]);
    expect(a).toEqual(expected);
    expect(b).toEqual(expected);
  });
});
