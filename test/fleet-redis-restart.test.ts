// Redis crashes (SIGKILL) in the middle of a run and comes back on the same port a moment later,
// with its append-only file (fsync'ed on every write, as docs/fleet.md recommends): the workers
// and `enqueue --wait` reconnect by themselves and the run ends with every job completed exactly
// once, outputs equal to tower.encode, no worker restarted.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectOutputsEqualEncode, HAVE_REDIS, makeImages, outcomes, settledOutcomes, startWorker, tesseraAsync, useFleet } from './helpers/fleet.js';

describe.skipIf(!HAVE_REDIS)('fleet: Redis restarted mid-run', () => {
  const fleet = useFleet('redis', { durable: true });

  it('resumes without losing or repeating a job', async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    // Bigger than the other tests' images so that the run lasts through the outage.
    const good = await makeImages(images, 40, false);
    // A job Redis moved to active just before it died, whose reply never reached a worker, is only
    // found again by the stalled-job check: a 1 s check (default 30 s) keeps that short. The lock
    // (5 s) outlives the outage, so no running job is taken from its worker.
    fleet.workers = await Promise.all([0, 1].map(() => startWorker(fleet.redis.url, 'restart', out, ['--lock-duration', '5000', '--stalled-interval', '1000'])));
    const run = tesseraAsync(['enqueue', join(images, 'good'), '--redis', fleet.redis.url, '--queue', 'restart', '--wait', '--max-pixels', String(512 * 512), '--min-pixels', String(256 * 256), '--progress-interval', '1']);

    // Crash Redis once a few jobs are done, keep it down a moment, start it again.
    await Promise.race(fleet.workers.map((w) => w.waitFor((l) => l.event === 'completed' && (l.worker?.jobs ?? 0) >= 3, 90_000)));
    const doneBefore = outcomes(fleet.workers).completed.size;
    await fleet.redis.kill();
    await new Promise((r) => setTimeout(r, 1500));
    await fleet.redis.start();

    const r = await run.done;
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(/done: 40 of 40 completed, 0 failed/);
    const { completed, failed } = await settledOutcomes(fleet.workers, 40);
    expect(doneBefore).toBeLessThan(40); // the outage did fall in the middle of the run
    expect(failed.size).toBe(0);
    expect(completed.size).toBe(40);
    for (const img of good) expect(completed.get(img)?.length, img).toBe(1);
    for (const w of fleet.workers) expect(w.proc.exitCode).toBe(null); // no worker died of it
    // The workers noticed the outage (their connection-error lines) and rode it out.
    expect(fleet.workers.some((w) => /ECONNREFUSED|Connection is closed|connect/i.test(w.stderr()))).toBe(true);

    await expectOutputsEqualEncode(join(images, 'good'), out, good, { maxPixels: 512 * 512, minPixels: 256 * 256 });
    for (const w of fleet.workers) w.proc.kill('SIGTERM');
    for (const w of fleet.workers) expect((await w.exited).code).toBe(0);
  });
});
