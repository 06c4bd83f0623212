// A worker SIGKILLed in the middle of an encode: its job's lock stops being renewed, BullMQ's
// stalled-job check (short intervals here) puts the job back, and the other worker completes it:
// once, with the same bytes tower.encode gives. The killed worker never reported it completed.
import { join } from 'node:path';
import { QueueEvents, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { expectOutputsEqualEncode, HAVE_REDIS, makeBigImage, makeImages, settledOutcomes, startWorker, tessera, useFleet } from './helpers/fleet.js';
import { jobIdOf } from '../src/fleet/job.js';

// Lock 4 s (renewed every 2 s by a live worker, slack enough on a loaded machine), stalled check
// every 1 s: a dead worker's job is back in the queue within about 5 s.
const FAST_RECOVERY = ['--lock-duration', '4000', '--stalled-interval', '1000'];
// 2048x2048 at full size: a few seconds of encode on the tiny tower, so the kill lands inside it.
const BIG = { maxPixels: 2048 * 2048 };

describe.skipIf(!HAVE_REDIS)('fleet: a worker SIGKILLed mid-encode', () => {
  const fleet = useFleet('kill');

  it("leaves its job to stalled-job recovery, and another worker completes it once", async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    const big = join(images, 'big', 'page.png');
    await makeBigImage(big, 2048);
    const small = await makeImages(images, 8, false);
    const q = ['--redis', fleet.redis.url, '--queue', 'kill'];
    const bigId = jobIdOf({ input: big, rel: 'page.png', options: BIG });

    // Watch the queue's events for the big job's start: its progress names the worker's pid.
    const conn = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const events = new QueueEvents('kill', { connection: conn });
    await events.waitUntilReady();
    const started = new Promise<number>((resolve) =>
      events.on('progress', ({ jobId, data }) => {
        if (jobId === bigId) resolve((data as { worker: { pid: number } }).worker.pid);
      }),
    );

    fleet.workers = await Promise.all([0, 1].map(() => startWorker(fleet.redis.url, 'kill', out, FAST_RECOVERY)));
    // The big one first (it is taken first), then the small ones.
    expect((await tessera(['enqueue', images + '/big', ...q, '--max-pixels', String(BIG.maxPixels)])).code).toBe(0);
    expect((await tessera(['enqueue', images + '/good', ...q])).code).toBe(0);

    const victimPid = await started;
    const victim = fleet.workers.find((w) => w.pid === victimPid)!;
    const survivor = fleet.workers.find((w) => w.pid !== victimPid)!;
    victim.proc.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');

    // The survivor takes the big job over once its lock runs out.
    const done = await survivor.waitFor((l) => l.event === 'completed' && l.jobId === bigId, 90_000);
    expect(done['attempt']).toBe(1); // a stalled job's recovery is not a failed attempt
    expect(victim.lines.some((l) => l.jobId === bigId)).toBe(false);

    const wait = await tessera(['enqueue', images + '/good', ...q, '--wait']);
    expect(wait.code, wait.stdout + wait.stderr).toBe(0);
    const { completed, failed } = await settledOutcomes(fleet.workers, 1 + small.length);
    expect(failed.size).toBe(0);
    for (const img of [big, ...small]) expect(completed.get(img)?.length, img).toBe(1);

    const queue = new Queue('kill', { connection: conn });
    const job = (await queue.getJob(bigId))!;
    expect(await job.getState()).toBe('completed');
    expect(job.stalledCounter).toBe(1);
    expect((job.returnvalue as { worker: { pid: number } }).worker.pid).toBe(survivor.pid);

    await expectOutputsEqualEncode(join(images, 'big'), out, [big], BIG);
    await expectOutputsEqualEncode(join(images, 'good'), out, small);
    await queue.close();
    await events.close();
    conn.disconnect();
  });
});
