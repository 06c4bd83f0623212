// Jobs put straight into the BullMQ queue (not through enqueueImages), as anyone who can write to
// Redis could: each job that can never work fails once (BullMQ's UnrecoverableError, attempts 3
// asked), with ERR_INVALID_ARGUMENT or ERR_IMAGE_TOO_LARGE and a message naming the field; a record
// that is not JSON is failed once and left readable; a group of 100,000 malformed entries is one
// failure and one manifest line; the worker goes on to the next job.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { createWorker, enqueueImages, GROUP_JOB, IMAGE_JOB, waitForJobs } from '../src/fleet/index.js';
import { HAVE_REDIS, makeImages, MODEL, useFleet } from './helpers/fleet.js';

describe.skipIf(!HAVE_REDIS)('fleet: hostile job data', () => {
  const fleet = useFleet('hostile-jobs');

  it('fails each impossible job once with its cause, and goes on', async () => {
    const [good, other] = await makeImages(join(fleet.tmp, 'images'), 2, false);
    const out = join(fleet.tmp, 'out');
    const connection = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const queue = new Queue('hostile', { connection });
    const retried = { attempts: 3, backoff: { type: 'fixed' as const, delay: 100 } };
    const add = async (id: string, data: unknown, name = IMAGE_JOB) => (await queue.add(name, data, { ...retried, jobId: id })).id!;

    // What each job must fail with: [code, a part of the message].
    const expected: Record<string, [string, string]> = {
      'nul-rel': ['ERR_INVALID_ARGUMENT', "fleet job: 'rel' holds a NUL byte"],
      'nul-input': ['ERR_INVALID_ARGUMENT', "fleet job: 'input' holds a NUL byte"],
      'nul-url': ['ERR_INVALID_ARGUMENT', 'gives the output path "a\\u0000b.png", which holds a NUL byte; give the job a rel'],
      'long-name': ['ERR_INVALID_ARGUMENT', 'is longer than the filesystem allows'],
      'never-fits': ['ERR_IMAGE_TOO_LARGE', "bytes of memory (more memory than"],
      proto: ['ERR_INVALID_ARGUMENT', 'fleet job: unknown key "__proto__"; a job\'s keys are input, rel, options'],
      missing: ['ERR_INVALID_ARGUMENT', "fleet job: 'input' is missing"],
      'wrong-type': ['ERR_INVALID_ARGUMENT', "fleet job: 'options.minPixels' must be a number, not \"1000\""],
      'huge-group': ['ERR_INVALID_ARGUMENT', "fleet group job: 'inputs' holds more than 64 images (it holds 100000)"],
      'bad-data': ['ERR_INVALID_ARGUMENT', 'job bad-data: its stored data is not valid JSON'],
      'bad-opts': ['ERR_INVALID_ARGUMENT', 'job bad-opts: its stored opts is not valid JSON'],
    };
    await add('nul-rel', { input: good, rel: 'a\0b.png' });
    await add('nul-input', { input: `${good}\0.png` });
    await add('nul-url', { input: 'http://127.0.0.1:9/a%00b.png' });
    await add('long-name', { input: good, rel: `${'n'.repeat(300)}.png` });
    await add('never-fits', { input: good, rel: 'huge.png', options: { minPixels: 4e11, maxPixels: 4e11 } });
    await add('proto', JSON.parse(`{"input": ${JSON.stringify(good)}, "__proto__": {"polluted": true}}`));
    await add('missing', { rel: 'a.png' });
    await add('wrong-type', { input: good, options: { minPixels: '1000' } });
    await add('huge-group', { inputs: Array.from({ length: 100_000 }, (_, i) => ({ input: `/nowhere/${i}.png`, extra: i })) }, GROUP_JOB);
    // Records someone wrote by hand: BullMQ cannot even parse them.
    await add('bad-data', { input: good, rel: 'bad-data.png' });
    await add('bad-opts', { input: good, rel: 'bad-opts.png' });
    await connection.hset(queue.toKey('bad-data'), 'data', '{not json');
    await connection.hset(queue.toKey('bad-opts'), 'opts', '{"attempts": 3,');
    // And one good job after them all.
    await add('good', { input: other, rel: 'good.png' });

    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const errors: string[] = [];
    const worker = await createWorker({ redis: connection, queue: 'hostile', model: tower, outDir: out, onError: (e) => errors.push(e.message) });
    try {
      const ids = [...Object.keys(expected), 'good'];
      const outcome = await waitForJobs(queue, connection, ids);
      expect(outcome.completed).toEqual(['good']);
      for (const [id, [code, text]] of Object.entries(expected)) {
        const job = (await queue.getJob(id))!;
        expect(job.failedReason, id).toContain(`${code}: `);
        expect(job.failedReason, id).toContain(text);
        expect(job.attemptsMade, id).toBe(1);
      }
      // The records that were not JSON are readable now, the original text kept.
      expect((await queue.getJob('bad-data'))!.data).toEqual({ unparsable: '{not json' });
      expect((await queue.getFailed()).length).toBe(Object.keys(expected).length);
      expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
    } finally {
      await worker.close();
      await tower.close();
    }
    // One manifest line per job: the huge group is one line, naming the job.
    const lines = readFileSync(join(out, 'manifest.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { input: string; status: string; error?: { code: string } });
    expect(lines.length).toBe(Object.keys(expected).length + 1);
    expect(lines.filter((l) => l.input === 'job huge-group')).toEqual([{ input: 'job huge-group', output: null, status: 'failed', error: expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }) }]);
    expect(errors.filter((e) => /JSON/.test(e))).toEqual([]);

    // enqueueImages refuses such data before adding anything.
    await expect(enqueueImages(queue, [{ input: good!, rel: 'x.png' }, { input: good!, rel: 'a\0b.png' }])).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    expect(await queue.getJobState('img-none')).toBe('unknown');
    expect((await queue.getJobCounts('waiting')).waiting).toBe(0);
    await queue.close();
    connection.disconnect();
  });
});
