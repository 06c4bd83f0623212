// SIGTERM to a worker in the middle of a job: it finishes that job (completed by it, once, with
// tower.encode's bytes), takes no other, and exits 0; the other worker does the rest. The job's input
// is a URL whose answer the test holds back until the worker has said it is stopping, so the signal
// lands inside the job on any machine, however fast it encodes.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';

import { join } from 'node:path';
import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { expectOutputsEqualEncode, HAVE_REDIS, makeBigImage, makeImages, settledOutcomes, startWorker, tessera, useFleet } from './helpers/fleet.js';
import { jobIdOf } from '../src/fleet/job.js';

const BIG = { maxPixels: 1536 * 1536 };

describe.skipIf(!HAVE_REDIS)('fleet: SIGTERM during a job', () => {
  const fleet = useFleet('term');

  it('finishes the current job, takes no other, exits 0', async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    const big = join(images, 'big', 'page.png');
    await makeBigImage(big, 1536);
    const small = await makeImages(images, 12, false);
    const q = ['--redis', fleet.redis.url, '--queue', 'term'];

    // The big page over HTTP, answered only once `release` is called.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const png = readFileSync(big);
    const server: Server = createServer((req, res) => {
      if (req.url !== '/page.png') return void res.writeHead(404).end();
      void held.then(() => res.writeHead(200, { 'content-type': 'image/png' }).end(png));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const addr = server.address();
    const bigUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/page.png`;
    const bigId = jobIdOf({ input: bigUrl, rel: 'page.png', options: BIG });

    const conn = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const events = new QueueEvents('term', { connection: conn });
    await events.waitUntilReady();
    const started = new Promise<number>((resolve) =>
      events.on('progress', ({ jobId, data }) => {
        if (jobId === bigId) resolve((data as { worker: { pid: number } }).worker.pid);
      }),
    );

    // (the page's server is on 127.0.0.1: fetched with the opt-in)
    fleet.workers = await Promise.all([0, 1].map(() => startWorker(fleet.redis.url, 'term', out, ['--allow-private-urls'])));
    expect((await tessera(['enqueue', bigUrl, ...q, '--max-pixels', String(BIG.maxPixels)])).code).toBe(0);
    expect((await tessera(['enqueue', images + '/good', ...q])).code).toBe(0);

    const pid = await started;
    const stopped = fleet.workers.find((w) => w.pid === pid)!;
    const other = fleet.workers.find((w) => w.pid !== pid)!;
    stopped.proc.kill('SIGTERM');
    await stopped.waitFor((l) => l.event === 'stopping');
    release();
    expect(await stopped.exited).toEqual({ code: 0, signal: null });
    await new Promise((r) => server.close(r));

    // Its last job was the big one, completed by it; nothing after.
    const jobLines = stopped.lines.filter((l) => l.type === 'job');
    expect(jobLines.at(-1)).toMatchObject({ event: 'completed', jobId: bigId });
    expect(stopped.lines.at(-2)).toMatchObject({ type: 'job', event: 'completed', jobId: bigId });
    expect(stopped.lines.at(-1)).toMatchObject({ type: 'worker', event: 'stopped' });
    // The signal came while the job ran: 'stopping' is logged before its completion.
    expect(stopped.lines.findIndex((l) => l.event === 'stopping')).toBe(stopped.lines.length - 3);

    const wait = await tessera(['enqueue', images + '/good', ...q, '--wait']);
    expect(wait.code, wait.stdout + wait.stderr).toBe(0);
    const { completed, failed } = await settledOutcomes(fleet.workers, 1 + small.length);
    expect(failed.size).toBe(0);
    for (const img of [bigUrl, ...small]) expect(completed.get(img)?.length, img).toBe(1);
    expect(other.lines.some((l) => l.jobId === bigId)).toBe(false);

    await expectOutputsEqualEncode(join(images, 'big'), out, [big], BIG);
    await expectOutputsEqualEncode(join(images, 'good'), out, small);
    await events.close();
    conn.disconnect();
  });
});
