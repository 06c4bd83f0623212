// Enqueuing the same work more than once does it once: two enqueues at the same moment, a third
// before any worker runs, a fourth with --wait, a fifth after everything finished; the job id is
// a hash of input, options and output path, so the same folder with other options is other work.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { jobIdOf } from '../src/fleet/job.js';
import { BAD_IMAGES, expectOutputsEqualEncode, HAVE_REDIS, makeImages, settledOutcomes, startWorker, tessera, tesseraAsync, useFleet } from './helpers/fleet.js';

describe('fleet job ids', () => {
  it('depend on input, options and output path, not on key order', () => {
    const a = jobIdOf({ input: '/data/a.png', rel: 'a.png', options: { minPixels: 1024, maxPixels: 4096 } });
    expect(jobIdOf({ options: { maxPixels: 4096, minPixels: 1024 }, rel: 'a.png', input: '/data/a.png' })).toBe(a);
    expect(jobIdOf({ input: '/data/a.png', rel: 'a.png', options: { minPixels: 1024, maxPixels: 8192 } })).not.toBe(a);
    expect(jobIdOf({ input: '/data/b.png', rel: 'a.png', options: { minPixels: 1024, maxPixels: 4096 } })).not.toBe(a);
    expect(jobIdOf({ input: '/data/a.png', rel: 'x/a.png', options: { minPixels: 1024, maxPixels: 4096 } })).not.toBe(a);
    expect(a).toMatch(/^img-[0-9a-f]{32}$/);
  });

  it('refuse inputs that are neither absolute paths nor http(s) URLs, and rels that climb out', () => {
    expect(() => jobIdOf({ input: 'relative.png' })).toThrow(/absolute path or an http\(s\) URL/);
    expect(() => jobIdOf({ input: 'ftp://host/a.png' })).toThrow(/absolute path or an http\(s\) URL/);
    expect(() => jobIdOf({ input: '/a.png', rel: '../../etc/x.png' })).toThrow(/relative path without/);
    expect(() => jobIdOf({ input: '/a.png', options: { maxPixel: 4 } as never })).toThrow(/maxPixel/);
  });
});

describe.skipIf(!HAVE_REDIS)('fleet: duplicate enqueue', () => {
  const fleet = useFleet('dup');

  it('adds each job once and does it once', async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    const good = await makeImages(images, 10);
    const q = ['--redis', fleet.redis.url, '--queue', 'dup'];

    // Two enqueues at once, before any worker: 13 jobs in all, not 26.
    const [a, b] = await Promise.all([tesseraAsync(['enqueue', images, ...q]).done, tesseraAsync(['enqueue', images, ...q]).done]);
    expect([a.code, b.code]).toEqual([0, 0]);
    let s = JSON.parse((await tessera(['queue-status', ...q, '--json'])).stdout) as { counts: Record<string, number> };
    expect(s.counts.waiting).toBe(13);
    const third = await tessera(['enqueue', images, ...q]);
    expect(third.stdout).toMatch(/enqueued 0 new jobs on dup; 13 already there \(waiting 13\)/);

    fleet.workers = [await startWorker(fleet.redis.url, 'dup', out)];
    const fourth = await tessera(['enqueue', images, ...q, '--wait']);
    expect(fourth.code).toBe(1);
    expect(fourth.stdout).toMatch(/done: 10 of 13 completed, 3 failed/);
    const fifth = await tessera(['enqueue', images, ...q, '--wait', '--json']);
    expect(fifth.code).toBe(1);
    const summary = fifth.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(summary.find((l) => l['type'] === 'enqueued')).toMatchObject({ jobs: 13, added: 0, existing: { completed: 10, failed: 3 } });
    expect(summary.filter((l) => l['type'] === 'failed').map((l) => l['code']).sort()).toEqual(Object.values(BAD_IMAGES).sort());

    const { completed, failed } = await settledOutcomes(fleet.workers, 13);
        for (const img of good) expect(completed.get(img)?.length, img).toBe(1);
    expect(completed.size).toBe(10);
    expect(failed.size).toBe(3);
    for (const l of fleet.workers[0]!.lines) if (l.input?.includes('/bad/')) expect(l.final).toBe(true);
    s = JSON.parse((await tessera(['queue-status', ...q, '--json'])).stdout) as { counts: Record<string, number> };
    expect(s.counts).toMatchObject({ completed: 10, failed: 3, waiting: 0 });
    await expectOutputsEqualEncode(images, out, good);
  });
});
