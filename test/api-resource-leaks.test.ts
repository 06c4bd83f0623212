// The guarantees hostile input must not cost: 500 encodes on one tower and 200 open/encode/close
// cycles (the three residencies in turn) on the tiny Qwen3.5 fixture leave RSS flat and leak no
// file descriptor (counted in /proc/self/fd). The fixture makes this cheap (about 10 s on a
// 2-core AMD EPYC) and still sensitive: RSS on this loop moves by about 15 MiB from noise
// (allocator arenas, V8), while leaking one encode's input (80 patch rows of 1,536 f32, 480 KiB)
// would add 117 MiB over the 250 encodes the first test measures, and leaking one open's weights
// (660 KiB, resident) 130 MiB over 200 cycles; the 48 MiB bound sits between noise and either.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { FIXTURES } from './helpers/fixtures.js';

const MODEL = join(FIXTURES, 'qwen3_5-tiny', 'model');
const IMAGE = join(FIXTURES, 'images', 'tiny.png'); // 30 x 20 -> 80 patch rows, 20 tokens
const MiB = 1024 * 1024;
const FLAT = 48 * MiB;

// A collection before each reading, so that garbage not yet collected does not read as a leak.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
// libvips's operation cache holds decoded images on purpose; it is not what is measured here.
sharp.cache(false);

const openFds = () => (process.platform === 'linux' ? readdirSync('/proc/self/fd').length : 0);
function rss(): number {
  gc();
  return process.memoryUsage().rss;
}

describe('no leaks', () => {
  it('500 encodes on one tower: RSS flat, no file descriptor leaked', async () => {
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const first = await tower.encode(IMAGE);
    for (let i = 0; i < 50; i++) await tower.encode(IMAGE); // warm: pools, arenas, JIT
    const fds = openFds();
    // Two readings 250 encodes apart, after 250 more: a leak grows by the same amount in every window
    // (one input per encode: 117 MiB per 250), while the one-off growth of a long run (V8's optimised
    // code, the thread pool's allocator high-water; larger on a loaded machine) lands in the first.
    let start = 0;
    const readings: number[] = [];
    for (const n of [250, 250]) {
      for (let i = 0; i < n; i++, start++) {
        const r = await tower.encode(IMAGE);
        if (start % 100 === 0) expect(r.embeddings).toEqual(first.embeddings);
      }
      readings.push(rss());
    }
    const grew = readings[1]! - readings[0]!;
    expect(openFds()).toBe(fds);
    expect(grew, `RSS grew ${(grew / MiB).toFixed(1)} MiB over the last 250 of 500 encodes`).toBeLessThan(FLAT);
    await tower.close();
  });

  it('200 open / encode / close cycles (resident, mapped, stream in turn): RSS flat, every descriptor closed', async () => {
    const residencies = ['resident', 'mapped', 'stream'] as const;
    const cycle = async (i: number) => {
      const t = await VisionTower.open(MODEL, { backend: 'cpu', residency: residencies[i % 3] });
      const r = await t.encode(IMAGE);
      await t.close();
      return r;
    };
    for (let i = 0; i < 15; i++) await cycle(i); // warm
    const fds = openFds();
    const before = rss();
    for (let i = 0; i < 200; i++) expect((await cycle(i)).tokens).toBe(20);
    const grew = rss() - before;
    expect(openFds()).toBe(fds);
    expect(grew, `RSS grew ${(grew / MiB).toFixed(1)} MiB over 200 cycles`).toBeLessThan(FLAT);
  });
});
