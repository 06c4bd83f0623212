// A fleet worker never replaces an output that a different input wrote (the worker's half of the
// output-collision rule): enqueueImages callers who pick colliding rel paths in separate calls (so no
// enqueue-side check can see both) get the second image failed once, ERR_INVALID_ARGUMENT naming
// both inputs, and the first output keeps its bytes. A real redis-server, createWorker in this process.
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { createWorker, enqueueImages, waitForJobs } from '../src/fleet/index.js';
import { FIXTURES } from './helpers/fixtures.js';
import { HAVE_REDIS, MODEL, useFleet } from './helpers/fleet.js';

describe.skipIf(!HAVE_REDIS)('fleet: one output slot, one input', () => {
  const fleet = useFleet('owner');

  it('a second input mapped to an existing output fails alone, ERR_INVALID_ARGUMENT naming both; the first output is kept', async () => {
    const images = join(fleet.tmp, 'images');
    mkdirSync(join(images, 'one'), { recursive: true });
    mkdirSync(join(images, 'two'), { recursive: true });
    const first = join(images, 'one', 'page.png');
    const sameNameOtherRoot = join(images, 'two', 'page.png');
    const otherExtension = join(images, 'one', 'page.jpg');
    copyFileSync(join(FIXTURES, 'images/tiny.png'), first);
    copyFileSync(join(FIXTURES, 'images/coffee.png'), sameNameOtherRoot);
    copyFileSync(join(FIXTURES, 'images/astronaut.jpg'), otherExtension);
    const out = join(fleet.tmp, 'out');
    const client = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const worker = await createWorker({ redis: client, queue: 'owner', model: tower, outDir: out, name: 'owner' });
    const queue = new Queue('owner', { connection: client });
    const runOne = async (input: string, rel: string) => {
      const [job] = await enqueueImages(queue, [{ input, rel }]);
      return { id: job!.id, outcome: await waitForJobs(queue, client, [job!.id]) };
    };
    try {
      const a = await runOne(first, 'page.png');
      expect(a.outcome.failed).toEqual([]);
      const written = readFileSync(join(out, 'page.safetensors'));

      // The same rel from another root, and another rel (page.jpg) on the same stem.
      for (const [input, rel] of [[sameNameOtherRoot, 'page.png'], [otherExtension, 'page.jpg']] as const) {
        const b = await runOne(input, rel);
        expect(b.outcome.completed).toEqual([]);
        expect(b.outcome.failed).toHaveLength(1);
        const f = b.outcome.failed[0]!;
        expect(f.code).toBe('ERR_INVALID_ARGUMENT');
        expect(f.message).toContain(input);
        expect(f.message).toContain(first);
        // Failed once: a permanent error is not retried.
        expect((await queue.getJob(b.id))!.attemptsMade).toBe(1);
        expect(readFileSync(join(out, 'page.safetensors')).equals(written)).toBe(true);
      }

    } finally {
      await worker.close();
      await queue.close();
      await tower.close();
      client.disconnect();
    }
  });
});
