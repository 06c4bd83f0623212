// The fleet as a Node service embeds it (tessera-vision/fleet): createWorker with the service's own
// ioredis client and open tower, enqueueImages and waitForJobs; job progress carries the worker's
// counters; close() leaves what the caller owns open. And the CLI's usage errors.
import { join } from 'node:path';
import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { createWorker, enqueueImages, waitForJobs, type FleetJobEvent, type ImageJobResult } from '../src/fleet/index.js';
import { ensureDist, expectOutputsEqualEncode, HAVE_REDIS, makeImages, MODEL, tessera, useFleet } from './helpers/fleet.js';

describe('fleet CLI usage', () => {
  beforeAll(() => ensureDist());
  it('names what is missing or wrong, exit 2', async () => {
    // An input that exists: a missing one is refused first (collectInputs), before the Redis flags.
    const image = join(MODEL, '..', '..', 'images', 'tiny.png');
    const missing = await tessera(['enqueue', '/tmp/no-such-input.png', '--redis', 'redis://127.0.0.1:1', '--queue', 'q']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/input \/tmp\/no-such-input\.png does not exist/);
    const w = await tessera(['worker', '--queue', 'q', '--model', MODEL, '--out-dir', '/tmp/x']);
    expect(w.code).toBe(2);
    expect(w.stderr).toMatch(/--redis is required/);
    const e = await tessera(['enqueue', image, '--redis', 'ftp://h:1', '--queue', 'q']);
    expect(e.code).toBe(2);
    expect(e.stderr).toMatch(/scheme must be redis:\/\/ or rediss:\/\//);
    const f = await tessera(['enqueue', image, '--redis', 'redis://127.0.0.1:1', '--queue', 'q', '--format', 'png']);
    expect(f.code).toBe(2);
    expect(f.stderr).toMatch(/--format must be one of safetensors, npy, vllm, vllm-torch, vllm-encoder-cache, sglang/);
    // Nothing listens on port 1: enqueue gives up on a Redis it never reached (a worker would wait).
    const g = await tessera(['enqueue', image, '--redis', 'redis://127.0.0.1:1', '--queue', 'q']);
    expect(g.code).toBe(2);
    expect(g.stderr).toMatch(/cannot reach Redis at redis:\/\/127.0.0.1:1/);
  });
});

describe.skipIf(!HAVE_REDIS)('fleet API', () => {
  const fleet = useFleet('api');

  it("runs in the service's process with the service's client and tower, and leaves both open", async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    const good = await makeImages(images, 6, false);
    const client = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const events: FleetJobEvent[] = [];
    const worker = await createWorker({ redis: client, queue: 'api', model: tower, outDir: out, name: 'embedded', onEvent: (e) => events.push(e) });

    const eventsClient = client.duplicate();
    const queueEvents = new QueueEvents('api', { connection: eventsClient });
    await queueEvents.waitUntilReady();
    const progress: { worker: { name: string } }[] = [];
    queueEvents.on('progress', ({ data }) => progress.push(data as { worker: { name: string } }));

    const queue = new Queue('api', { connection: client });
    const jobs = await enqueueImages(queue, good.map((input) => ({ input, rel: input.slice(images.length + 1) })));
    expect(jobs.map((j) => j.state)).toEqual(good.map(() => 'added'));
    const outcome = await waitForJobs(queue, client, jobs.map((j) => j.id));
    expect(outcome.failed).toEqual([]);
    expect(outcome.completed.sort()).toEqual(jobs.map((j) => j.id).sort());

    const results = await Promise.all(jobs.map(async (j) => (await queue.getJob(j.id))!.returnvalue as ImageJobResult));
    for (const r of results) {
      expect(r.status).toBe('encoded');
      expect(r.worker.name).toBe('embedded');
      expect(r.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(results.map((r) => r.worker.jobs).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(events.filter((e) => e.type === 'completed')).toHaveLength(6);
    expect(progress.length).toBeGreaterThan(0);
    expect(progress[0]!.worker.name).toBe('embedded');
    await expectOutputsEqualEncode(images, out, good);

    await worker.close();
    // What the caller owns stays usable.
    expect(await client.ping()).toBe('PONG');
    expect((await tower.encode(good[0]!)).tokens).toBeGreaterThan(0);
    await queueEvents.close();
    eventsClient.disconnect();
    await queue.close();
    await tower.close();
    client.disconnect();
  });
});
