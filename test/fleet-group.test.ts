// Group jobs (`tessera enqueue --group N`): N images per job, encoded together by encodeMany and
// each written as `encode --out-dir` writes it. A bad image among good ones fails alone, listed
// with its code in the group's result, and the group is not retried; the same groups enqueued
// again add nothing; a worker SIGKILLed mid-group leaves the group to stalled-job recovery, and
// the other worker finishes it, skipping what the dead one had already written (each output file
// written exactly once); a transient error (a 503 fetch) retries the group, which then skips the
// images already written.
import { readFileSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';

import { join, relative } from 'node:path';
import { Queue, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP_JOB, MAX_GROUP_IMAGES, groupJobIdOf, type GroupJobResult } from '../src/fleet/job.js';
import { BAD_IMAGES, expectOutputsEqualEncode, HAVE_REDIS, type JobLine, jsonLines, killWorker, makeBigImage, makeImages, MODEL, startWorker, tessera, useFleet } from './helpers/fleet.js';

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const outputOf = (root: string, out: string, img: string) => join(out, relative(root, img).replace(/\.[^./]+$/, '') + '.safetensors');

describe('fleet group job ids', () => {
  it('depend on the images and options, not on the images order; groups are bounded', () => {
    const a = groupJobIdOf({ inputs: [{ input: '/d/a.png', rel: 'a.png' }, { input: '/d/b.png', rel: 'b.png' }], options: { maxPixels: 4096 } });
    expect(groupJobIdOf({ options: { maxPixels: 4096 }, inputs: [{ input: '/d/b.png', rel: 'b.png' }, { input: '/d/a.png', rel: 'a.png' }] })).toBe(a);
    expect(groupJobIdOf({ inputs: [{ input: '/d/a.png', rel: 'a.png' }, { input: '/d/b.png', rel: 'b.png' }], options: { maxPixels: 8192 } })).not.toBe(a);
    expect(groupJobIdOf({ inputs: [{ input: '/d/a.png', rel: 'a.png' }], options: { maxPixels: 4096 } })).not.toBe(a);
    expect(a).toMatch(/^grp-[0-9a-f]{32}$/);
    const many = Array.from({ length: MAX_GROUP_IMAGES + 1 }, (_, i) => ({ input: `/d/${i}.png` }));
    expect(() => groupJobIdOf({ inputs: many })).toThrow(/inputs/);
    expect(() => groupJobIdOf({ inputs: [] })).toThrow(/inputs/);
    expect(() => groupJobIdOf({ inputs: [{ input: 'relative.png' }] })).toThrow(/absolute path/);
  });
});

describe.skipIf(!HAVE_REDIS)('fleet: group jobs', () => {
  const fleet = useFleet('group');
  let conn: Redis;

  beforeAll(async () => {
    conn = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    conn?.disconnect();
  });

  it('a bad image among good ones fails alone, once, with its code; the good ones equal tower.encode; a second enqueue adds nothing', async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    const good = await makeImages(images, 9);
    const q = ['--redis', fleet.redis.url, '--queue', 'group'];
    fleet.workers = [await startWorker(fleet.redis.url, 'group', out)];

    // 12 images sorted (bad/ first): groups of 4, the first holds the 3 bad ones and a good one.
    const r = await tessera(['enqueue', images, ...q, '--group', '4', '--wait']);
    expect(r.code, r.stdout + r.stderr).toBe(1);
    expect(r.stdout).toMatch(/enqueued 3 new jobs/);
    expect(r.stdout).toMatch(/done: 9 of 12 completed, 3 failed \(images, in 3 group jobs\)/);
    for (const [rel, code] of Object.entries(BAD_IMAGES)) {
      const lines = r.stdout.split('\n').filter((l) => l.startsWith(`failed ${join(images, rel)} `));
      expect(lines, rel).toHaveLength(1);
      expect(lines[0]).toContain(code);
    }

    // Each group job completed at its first attempt; its result lists every image.
    const queue = new Queue('group', { connection: conn });
    const jobs = await queue.getJobs(['completed', 'failed', 'waiting', 'delayed', 'active']);
    expect(jobs).toHaveLength(3);
    const byInput = new Map<string, GroupJobResult['images'][number]>();
    for (const job of jobs) {
      expect(job.name).toBe(GROUP_JOB);
      expect(await job.getState()).toBe('completed');
      expect(job.attemptsMade).toBe(1);
      for (const img of (job.returnvalue as GroupJobResult).images) {
        expect(byInput.has(img.input), img.input).toBe(false);
        byInput.set(img.input, img);
      }
    }
    for (const [rel, code] of Object.entries(BAD_IMAGES)) expect(byInput.get(join(images, rel))).toMatchObject({ status: 'failed', error: { code } });
    for (const img of good) {
      const res = byInput.get(img);
      expect(res, img).toMatchObject({ status: 'encoded', output: outputOf(images, out, img) });
      expect(res && 'sha256' in res && res.sha256, img).toBe(sha256(outputOf(images, out, img)));
      expect(res && 'tokens' in res && res.tokens).toBeGreaterThan(0);
    }
    // One log line per group, each good image encoded once over them; one manifest line per image.
    const completedLines = () => fleet.workers.flatMap((w) => w.lines).filter((l) => l.type === 'job' && l.event === 'completed');
    await fleet.workers[0]!.waitFor(() => completedLines().length === 3);
    const encodedInLogs = completedLines().flatMap((l) => (l['images'] as { input: string; status: string }[]).filter((i) => i.status === 'encoded').map((i) => i.input));
    expect(encodedInLogs.sort()).toEqual(good);
    const manifest = readFileSync(join(out, 'manifest.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { input: string; status: string; error?: { code: string } });
    expect(manifest).toHaveLength(12);
    for (const [rel, code] of Object.entries(BAD_IMAGES)) expect(manifest.find((e) => e.input === join(images, rel))).toMatchObject({ status: 'failed', error: { code } });

    await expectOutputsEqualEncode(images, out, good);

    // The same groups again: nothing added, nothing done, the same answer.
    const mtimes = good.map((g) => statSync(outputOf(images, out, g)).mtimeMs);
    const again = await tessera(['enqueue', images, ...q, '--group', '4', '--wait', '--json']);
    expect(again.code).toBe(1);
    const lines = jsonLines(again.stdout);
    expect(lines.find((l) => l['type'] === 'enqueued')).toMatchObject({ added: 0, existing: { completed: 3 } });
    expect(lines.find((l) => l['type'] === 'done')).toMatchObject({ jobs: 3, images: 12, completed: 9, failed: 3 });
    await new Promise((res) => setTimeout(res, 500));
    expect(completedLines()).toHaveLength(3);
    expect(good.map((g) => statSync(outputOf(images, out, g)).mtimeMs)).toEqual(mtimes);

    // Same records as `encode --out-dir` (which passes stages: false; the group job gives none): it skips them all.
    const enc = await tessera(['encode', images, '--model', MODEL, '--out-dir', out, '--json']);
    expect(JSON.parse(enc.stdout.trim().split('\n').pop()!)).toMatchObject({ encoded: 0, skipped: good.length, failed: 3 });
    await queue.close();
  });

  it('a worker SIGKILLed mid-group leaves it to stalled-job recovery; the other finishes it, every output written exactly once', async () => {
    await Promise.all(fleet.workers.map(killWorker));
    const images = join(fleet.tmp, 'kill-images');
    const out = join(fleet.tmp, 'kill-out');
    const small = await makeImages(images, 6, false);
    // Sorted: the four small ones of good/ first (written before the big one is reached), the big one, then nested/ ones.
    const big = join(images, 'good', 'm-big.png');
    await makeBigImage(big, 2048);
    const inputs = [...small.filter((s) => !s.includes('nested')), big, ...small.filter((s) => s.includes('nested'))];
    const BIG = { maxPixels: 2048 * 2048 }; // seconds of encode on the tiny tower: the kill lands inside it
    const groupId = groupJobIdOf({ inputs: inputs.map((i) => ({ input: i, rel: relative(images, i) })), options: BIG });

    const FAST_RECOVERY = ['--lock-duration', '4000', '--stalled-interval', '1000'];
    fleet.workers = await Promise.all([0, 1].map(() => startWorker(fleet.redis.url, 'kill', out, FAST_RECOVERY)));
    const q = ['--redis', fleet.redis.url, '--queue', 'kill'];
    const e = await tessera(['enqueue', images, ...q, '--group', String(inputs.length), '--max-pixels', String(BIG.maxPixels), '--json']);
    expect(e.code, e.stderr).toBe(0);
    expect(jsonLines(e.stdout).find((l) => l['type'] === 'job')).toMatchObject({ id: groupId, state: 'added' });

    // Once the first small outputs are there, the big one is being encoded: kill whichever worker holds the group.
    const firstOutputs = inputs.slice(0, 4).map((i) => outputOf(images, out, i));
    const until = Date.now() + 60_000;
    while (!firstOutputs.every((f) => statSync(f, { throwIfNoEntry: false })) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    const queue = new Queue('kill', { connection: conn });
    const holder = (await queue.getJob(groupId))!;
    expect(await holder.getState()).toBe('active');
    // processedBy: the worker's name, host:pid by default.
    const victim = fleet.workers.find((w) => w.pid === Number(String(holder.processedBy).split(':').pop()))!;
    expect(victim, `processedBy ${holder.processedBy}`).toBeDefined();
    // What the dead worker had written, and the files' identity (an atomic rewrite is a new inode).
    const before = new Map<string, number>();
    victim.proc.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');
    for (const i of inputs) {
      const st = statSync(outputOf(images, out, i), { throwIfNoEntry: false });
      if (st) before.set(i, st.ino);
    }
    expect(before.size).toBeGreaterThanOrEqual(4);
    expect(before.has(big)).toBe(false);

    const survivor = fleet.workers.find((w) => w !== victim)!;
    const done = (await survivor.waitFor((l) => l.event === 'completed' && l.jobId === groupId, 60_000)) as JobLine & GroupJobResult;
    expect(done['attempt']).toBe(1); // a stalled job's recovery is not a failed attempt
    expect(victim.lines.some((l) => l.jobId === groupId && l.event === 'completed')).toBe(false);
    const job = (await queue.getJob(groupId))!;
    expect(await job.getState()).toBe('completed');
    expect(job.stalledCounter).toBe(1);
    // The survivor skipped exactly what the victim wrote and encoded the rest.
    for (const img of done.images) {
      expect(img.status, img.input).toBe(before.has(img.input) ? 'skipped' : 'encoded');
      if (before.has(img.input)) expect(statSync(outputOf(images, out, img.input)).ino, img.input).toBe(before.get(img.input));
    }
    expect(done.images.map((i) => i.input)).toEqual(inputs);
    await expectOutputsEqualEncode(images, out, inputs, BIG);
    await queue.close();
  });
  it('a transient error on one image retries the group after the others are written; the retry skips them', async () => {
    await Promise.all(fleet.workers.map(killWorker));
    const images = join(fleet.tmp, 'retry-images');
    const out = join(fleet.tmp, 'retry-out');
    const [local, served] = await makeImages(images, 2, false);
    let hits = 0;
    const server = createServer((_req, res) => (++hits === 1 ? void res.writeHead(503).end('busy') : void res.writeHead(200, { 'content-type': 'image/png' }).end(readFileSync(served!))));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const addr = server.address();
    const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}/flaky/page.png`;
    try {
      // The test's server is on 127.0.0.1: a worker fetches from it only with the opt-in.
      fleet.workers = [await startWorker(fleet.redis.url, 'retry', out, ['--allow-private-urls'])];
      const r = await tessera(['enqueue', local!, '-', '--redis', fleet.redis.url, '--queue', 'retry', '--group', '2', '--backoff-ms', '200', '--wait'], url + '\n');
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(hits).toBe(2);
      const w = fleet.workers[0]!;
      const retried = w.lines.find((l) => l.event === 'failed')!;
      expect(retried).toMatchObject({ code: 'ERR_IO', final: false, inputs: [local, url] });
      const done = (await w.waitFor((l) => l.event === 'completed')) as JobLine & GroupJobResult;
      expect(done['attempt']).toBe(2);
      expect(done.images.map((i) => [i.input, i.status])).toEqual([[local, 'skipped'], [url, 'encoded']]);
      const queue = new Queue('retry', { connection: conn });
      const [job] = (await queue.getJobs(['completed'])) as Job[];
      expect(job!.attemptsMade).toBe(2);
      await queue.close();
      await expectOutputsEqualEncode(join(images, 'good'), out, [local!]);
      expect(sha256(join(out, 'flaky', 'page.safetensors'))).toBe((done.images[1] as { sha256: string }).sha256);
    } finally {
      server.close();
    }
  });
});
