// A real redis-server killed (SIGKILL) while `tessera enqueue` adds a large list: the command ends
// with ERR_IO and a count that is honest about what it cannot know. A batch goes to Redis as one
// pipeline, so Redis may have taken any part of the batch in flight: the jobs it confirmed are a
// lower bound ("at least N") and that batch bounds the rest ("up to K more"). Redis keeps an
// append-only file fsync'ed on every write, so what it took survives the crash and is counted after
// a restart; the same enqueue again then adds exactly the rest.
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { HAVE_REDIS, tessera, tesseraAsync, useFleet } from './helpers/fleet.js';

const JOBS = 20_000;

describe.skipIf(!HAVE_REDIS)('fleet: Redis killed mid-enqueue', () => {
  const fleet = useFleet('enqueue-killed', { durable: true });

  it('says at least how many jobs are queued and at most how many more may be, and the rerun adds exactly the rest', async () => {
    const urls = Array.from({ length: JOBS }, (_, i) => `http://127.0.0.1:9/page-${i}.png`).join('\n') + '\n';
    const run = tesseraAsync(['enqueue', '-', '--redis', fleet.redis.url, '--queue', 'killed'], urls);

    // Kill Redis as soon as the first jobs have landed: the run is then in its first batches.
    const watch = new Redis(fleet.redis.url, { maxRetriesPerRequest: 1 });
    const waiting = `bull:killed:wait`;
    for (let t = 0; t < 6000 && (await watch.llen(waiting)) === 0; t++) await new Promise((r) => setTimeout(r, 10));
    watch.disconnect();
    await fleet.redis.kill();

    const cut = await run.done;
    expect(cut.code, cut.stdout + cut.stderr).toBe(2);
    const m = new RegExp(`ERR_IO: [^\\n]*: at least (\\d+) of ${JOBS} jobs are in the queue \\((\\d+) added now, 0 there before\\)(?:; up to (\\d+) more, of the batch being added when it broke off, may have landed too)?\\. `).exec(cut.stderr);
    expect(m, cut.stderr).not.toBeNull();
    const atLeast = Number(m![1]);
    const upTo = Number(m![3] ?? 0);
    expect(atLeast + upTo).toBeLessThan(JOBS); // the kill fell in the middle of the run

    await fleet.redis.start();
    const conn = new Redis(fleet.redis.url);
    const queue = new Queue('killed', { connection: conn });
    try {
      const queued = (await queue.getJobCounts('waiting')).waiting;
      expect(queued).toBeGreaterThan(0);
      expect(queued).toBeGreaterThanOrEqual(atLeast);
      expect(queued).toBeLessThanOrEqual(atLeast + upTo);
      const rerun = await tessera(['enqueue', '-', '--redis', fleet.redis.url, '--queue', 'killed'], urls);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(rerun.stdout.trim()).toBe(`enqueued ${JOBS - queued} new jobs on killed; ${queued} already there (waiting ${queued})`);
      expect((await queue.getJobCounts('waiting')).waiting).toBe(JOBS);
    } finally {
      await queue.close();
      conn.disconnect();
    }
  }, 240_000);
});
