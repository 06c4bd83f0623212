// VisionTower's behaviour through the public API: info, progress, abort, close, argument checks,
// non-finite detection.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { TesseraError, VisionTower } from '../src/index.js';
import { FIXTURES, readTensors } from './helpers/fixtures.js';

const MODEL = join(FIXTURES, 'qwen3_vl-tiny', 'model');
const CASE = readTensors(join(FIXTURES, 'qwen3_vl-tiny', 'expected', 'coffee.safetensors'));
const PIXELS = CASE['pixel_values']!.f32();
const GRID = { t: 1, h: 8, w: 12 };

async function rejection(p: Promise<unknown>): Promise<TesseraError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(TesseraError);
    return e as TesseraError;
  }
  throw new Error('expected a rejection');
}

describe('VisionTower API', () => {
  it('describes the tower in info', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    expect(tower.info).toMatchObject({
      family: 'qwen3_vl',
      source: 'hf-folder',
      depth: 4,
      hidden: 144,
      heads: 2,
      headDim: 72,
      outHidden: 128,
      patchSize: 16,
      mergeSize: 2,
      dtype: 'f16',
      backend: 'cpu',
    });
    const { total, perBlock, nonBlock } = tower.info.bytes;
    // A block: qkv 3D·D + proj D·D + fc1/fc2 2·I·D weights (f16) plus 3D + D + I + D biases and 4·D norms.
    const D = 144, I = 208;
    expect(perBlock).toBe(2 * (4 * D * D + 2 * I * D + 3 * D + D + I + D + 4 * D));
    expect(total).toBe(4 * perBlock + nonBlock);
    expect(tower.scratchBytes(96)).toBeGreaterThan(96 * D * 4 * 6);
    await tower.close();
  });

  it('reports progress once per stage, in order', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const seen: number[] = [];
    let blocks = 0;
    await tower.encodePixels({ pixelValues: PIXELS, grid: GRID }, {
      onProgress: (p) => {
        seen.push(p.block);
        blocks = p.blocks;
        expect(p.images).toBe(1);
      },
    });
    // embed + 4 blocks + 2 deepstack mergers + merger
    expect(blocks).toBe(8);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    await tower.close();
  });

  it('honours an AbortSignal before and during an encode', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const pre = new AbortController();
    const reason = new Error('the user closed the window');
    pre.abort(reason);
    const before = await rejection(tower.encodePixels({ pixelValues: PIXELS, grid: GRID }, { signal: pre.signal }));
    expect(before.code).toBe('ERR_ABORTED');
    // The signal's reason is kept as the cause (the caller's own, or AbortSignal.timeout's TimeoutError).
    expect(before.cause).toBe(reason);
    // Between stages: abort at the first progress event of an encode whose stages take tens of
    // ms each (4,096 patches), so the worker is still mid-tower when the flag is set.
    const big = new Float32Array(4096 * 1536).map((_, i) => Math.sin(i * 0.001));
    const during = new AbortController();
    const seen: number[] = [];
    const e = await rejection(
      tower.encodePixels(
        { pixelValues: big, grid: { t: 1, h: 64, w: 64 } },
        { signal: during.signal, onProgress: (p) => (seen.push(p.block), during.abort()) },
      ),
    );
    expect(e.code).toBe('ERR_ABORTED');
    expect((e.cause as DOMException).name).toBe('AbortError');
    expect(seen.length).toBeLessThan(8);
    // The tower still works afterwards.
    const ok = await tower.encodePixels({ pixelValues: PIXELS, grid: GRID });
    expect(ok.tokens).toBe(24);
    await tower.close();
  });

  it('close waits for work in flight; later calls reject with ERR_CLOSED', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const inflight = tower.encodePixels({ pixelValues: PIXELS, grid: GRID });
    const closing = tower.close();
    expect((await inflight).tokens).toBe(24);
    await closing;
    expect((await rejection(tower.encodePixels({ pixelValues: PIXELS, grid: GRID }))).code).toBe('ERR_CLOSED');
    expect(() => tower.scratchBytes(4)).toThrow(TesseraError);
    await tower.close(); // idempotent
  });

  it('refuses malformed pixel input with ERR_INVALID_ARGUMENT', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const bad = [
      { pixelValues: PIXELS.subarray(1), grid: GRID },
      { pixelValues: PIXELS, grid: { t: 1, h: 8, w: 10 } },
      { pixelValues: PIXELS, grid: { t: 1, h: 7, w: 12 } },
      { pixelValues: PIXELS, grid: { t: 0, h: 8, w: 12 } },
      { pixelValues: [1, 2, 3] as unknown as Float32Array, grid: GRID },
    ];
    for (const input of bad) {
      const e = await rejection(tower.encodePixels(input));
      expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    }
    await tower.close();
  });

  it('a stage that overflows fails with ERR_NUMERIC naming it', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const px = PIXELS.slice();
    px[5 * 1536 + 7] = Infinity;
    const e = await rejection(tower.encodePixels({ pixelValues: px, grid: GRID }));
    expect(e.code).toBe('ERR_NUMERIC');
    expect(e.message).toContain("'embed'");
    expect(e.message).toContain('token 5');
    await tower.close();
  });
});
