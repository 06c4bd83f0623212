// The fleet's URL policy (src/fleet/url-policy.ts, docs/fleet.md#urls), against real HTTP servers
// on 127.0.0.1 and 127.0.0.2 and a real Redis:
// - `tessera enqueue` refuses inputs that are URLs of another scheme (file:, data:, gopher:, ftp:),
//   exit 2, queueing nothing;
// - a worker refuses loopback addresses by default, given as an address or as a name (after DNS
//   resolution), before any request reaches the server, and fails the job once;
// - with an allow list (127.0.0.1 only), a redirect to another loopback address (127.0.0.2) is
//   refused at that hop, a redirect to file: is refused, a redirect loop stops after MAX_REDIRECTS,
//   each failing once (ERR_INVALID_ARGUMENT); an allowed redirect is followed and encoded.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { createWorker, enqueueImages, waitForJobs } from '../src/fleet/index.js';
import { MAX_REDIRECTS, nonPublicKind } from '../src/fleet/url-policy.js';
import { readSafetensors } from './helpers/images.js';
import { HAVE_REDIS, makeImages, MODEL, startWorker, tessera, useFleet } from './helpers/fleet.js';

/** A server on `host` that counts its hits per path and answers with `route`. */
async function serve(host: string, route: (path: string, res: import('node:http').ServerResponse) => void): Promise<{ server: Server; base: string; hits: Map<string, number> }> {
  const hits = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    route(path, res);
  });
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  const addr = server.address();
  return { server, base: `http://${host}:${typeof addr === 'object' && addr ? addr.port : 0}`, hits };
}

describe('fleet: which addresses a worker refuses', () => {
  it('names each non-public kind, IPv4 carried in IPv6 included, and passes public addresses', () => {
    const cases: [string, string | undefined][] = [
      ['127.0.0.1', 'loopback'],
      ['127.255.0.9', 'loopback'],
      ['::1', 'loopback'],
      ['0.0.0.0', 'unspecified'],
      ['::', 'unspecified'],
      ['10.1.2.3', 'private'],
      ['172.31.255.255', 'private'],
      ['192.168.0.1', 'private'],
      ['100.64.0.1', 'private'],
      ['169.254.169.254', 'link-local'],
      ['fe80::1', 'link-local'],
      ['fd12:3456::1', 'unique-local'],
      ['::ffff:127.0.0.1', 'loopback'],
      ['::ffff:a9fe:a9fe', 'link-local'],
      ['224.0.0.1', 'multicast or reserved'],
      ['8.8.8.8', undefined],
      ['172.32.0.1', undefined],
      ['2606:4700:4700::1111', undefined],
      ['::ffff:8.8.8.8', undefined],
    ];
    for (const [ip, kind] of cases) expect(nonPublicKind(ip), ip).toBe(kind);
  });
});

describe.skipIf(!HAVE_REDIS)('fleet: URL policy', () => {
  const fleet = useFleet('url-policy');
  let a: Awaited<ReturnType<typeof serve>>;
  let b: Awaited<ReturnType<typeof serve>>;
  let png: Buffer;

  beforeAll(async () => {
    const [made] = await makeImages(join(fleet.tmp, 'made'), 1, false);
    png = readFileSync(made!);
    b = await serve('127.0.0.2', (_path, res) => void res.writeHead(200, { 'content-type': 'image/png' }).end(png));
    a = await serve('127.0.0.1', (path, res) => {
      if (path === '/page.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (path === '/to-page') return void res.writeHead(302, { location: '/page.png' }).end();
      if (path === '/to-b') return void res.writeHead(302, { location: `${b.base}/page.png` }).end();
      if (path === '/to-file') return void res.writeHead(301, { location: 'file:///etc/passwd' }).end();
      if (path === '/loop') return void res.writeHead(307, { location: '/loop' }).end();
      res.writeHead(404).end();
    });
  });
  afterAll(async () => {
    await Promise.all([a, b].map((s) => s && new Promise((r) => s.server.close(r))));
  });

  it('enqueue refuses URLs of other schemes, exit 2, and queues nothing', async () => {
    for (const input of ['file:///etc/passwd', 'data:image/png;base64,iVBORw0KGgo=', 'gopher://127.0.0.1:70/1', 'ftp://127.0.0.1/page.png']) {
      const r = await tessera(['enqueue', input, '--redis', fleet.redis.url, '--queue', 'schemes']);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toContain(`ERR_INVALID_ARGUMENT: input ${JSON.stringify(input)} is a ${input.split(':')[0]}: URL`);
    }
    const s = await tessera(['queue-status', '--redis', fleet.redis.url, '--queue', 'schemes', '--json']);
    expect(JSON.parse(s.stdout).counts).toEqual({ waiting: 0, active: 0, delayed: 0, completed: 0, failed: 0 });
  });

  it('a worker refuses loopback addresses by default, by address and by name, before any request', async () => {
    const out = join(fleet.tmp, 'default-out');
    fleet.workers.push(await startWorker(fleet.redis.url, 'default', out));
    const port = new URL(a.base).port;
    const urls = [`${a.base}/literal.png`, `http://localhost:${port}/named.png`];
    const r = await tessera(['enqueue', ...urls, '--redis', fleet.redis.url, '--queue', 'default', '--wait', '--attempts', '3', '--backoff-ms', '100']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/done: 0 of 2 completed, 2 failed/);
    expect(r.stdout).toContain(`failed ${urls[0]} ERR_INVALID_ARGUMENT: image URL ${urls[0]}: refused to fetch from 127.0.0.1, a loopback address`);
    expect(r.stdout).toMatch(new RegExp(`failed http://localhost:${port}/named.png ERR_INVALID_ARGUMENT: .*refused to fetch from localhost \\((127\\.0\\.0\\.1|::1)\\), a loopback address; .*--allow-private-urls`));
    // Nothing reached the server, and neither job was retried.
    expect(a.hits.get('/literal.png')).toBeUndefined();
    expect(a.hits.get('/named.png')).toBeUndefined();
    const failed = fleet.workers[0]!.lines.filter((l) => l.event === 'failed');
    expect(failed.map((l) => [l.code, l.final])).toEqual([['ERR_INVALID_ARGUMENT', true], ['ERR_INVALID_ARGUMENT', true]]);
  });

  it('with an allow list, every redirect hop is checked, redirects are capped, and permanent refusals fail once', async () => {
    const out = join(fleet.tmp, 'allow-out');
    const connection = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const worker = await createWorker({ redis: connection, queue: 'allow', model: tower, outDir: out, fetch: { allowPrivateUrls: ['127.0.0.1'] } });
    const queue = new Queue('allow', { connection });
    try {
      const urls = {
        page: `${a.base}/page.png`,
        redirected: `${a.base}/to-page`,
        toB: `${a.base}/to-b`,
        toFile: `${a.base}/to-file`,
        loop: `${a.base}/loop`,
        direct: `${b.base}/direct.png`,
      };
      const jobs = await enqueueImages(queue, Object.values(urls).map((input) => ({ input })), { attempts: 3, backoffMs: 100 });
      const outcome = await waitForJobs(queue, connection, jobs.map((j) => j.id));
      expect(outcome.completed.length).toBe(2);
      const failure = (input: string) => outcome.failed.find((f) => f.input === input || jobs.find((j) => j.id === f.id)?.input === input);
      expect(failure(urls.toB)).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(`refused to fetch from 127.0.0.2, a loopback address`) });
      expect(failure(urls.direct)).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(`refused to fetch from 127.0.0.2, a loopback address`) });
      expect(failure(urls.toFile)).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining('fetches http(s) URLs only, not file:') });
      expect(failure(urls.loop)).toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(`more than ${MAX_REDIRECTS} redirects`) });
      // The refused host was never asked; the loop was followed MAX_REDIRECTS times, once (no retry).
      expect(b.hits.size).toBe(0);
      expect(a.hits.get('/loop')).toBe(MAX_REDIRECTS + 1);
      for (const input of [urls.toB, urls.toFile, urls.loop, urls.direct]) {
        const job = await queue.getJob(jobs.find((j) => j.input === input)!.id);
        expect(job!.attemptsMade, input).toBe(1);
      }
      // The allowed redirect was followed: its output is the page's, at the URL's own path.
      const [page, redirected] = ['page', 'to-page'].map((n) => readSafetensors(join(out, `${n}.safetensors`))['embeddings']!);
      expect(Buffer.from(redirected!.bytes).equals(Buffer.from(page!.bytes))).toBe(true);
    } finally {
      await worker.close();
      await queue.close();
      await tower.close();
      connection.disconnect();
    }
  });

  it('createWorker refuses an allow list entry that is not an address or a subnet', async () => {
    await expect(createWorker({ redis: fleet.redis.url, queue: 'x', model: MODEL, outDir: join(fleet.tmp, 'x'), fetch: { allowPrivateUrls: ['intranet'] } })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARGUMENT',
      message: expect.stringContaining('"intranet" is not an IP address or a CIDR subnet'),
    });
  });
});
