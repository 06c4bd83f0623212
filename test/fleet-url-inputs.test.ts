// http(s) inputs, from a local server: an image is fetched and encoded (output equal to
// tower.encode of the same bytes); a 404 fails at once (ERR_IMAGE_DECODE); a body over the
// worker's --max-fetch-bytes fails at once (ERR_IMAGE_TOO_LARGE), whether declared or streamed; a
// 503 is transient: retried with backoff, it completes when the server recovers and fails with
// ERR_IO once the attempts are spent. The list comes from stdin (`-`).
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOutputsEqualEncode, HAVE_REDIS, makeImages, startWorker, tessera, useFleet } from './helpers/fleet.js';

describe.skipIf(!HAVE_REDIS)('fleet: URL inputs', () => {
  const fleet = useFleet('url');
  let server: Server;
  let base: string;
  const hits = new Map<string, number>();

  beforeAll(async () => {
    const [made] = await makeImages(join(fleet.tmp, 'made'), 1, false);
    mkdirSync(join(fleet.tmp, 'images', 'good'), { recursive: true });
    copyFileSync(made!, join(fleet.tmp, 'images', 'good', 'page.png'));
    const png = readFileSync(made!);
    server = createServer((req, res) => {
      const path = req.url ?? '/';
      hits.set(path, (hits.get(path) ?? 0) + 1);
      if (path === '/good/page.png' || (path === '/flaky.png' && hits.get(path)! > 1)) return void res.writeHead(200, { 'content-type': 'image/png' }).end(png);
      if (path === '/flaky.png' || path === '/down.png') return void res.writeHead(503).end('busy');
      if (path === '/declared-huge.png') return void res.writeHead(200, { 'content-length': String(4 << 20) }).end(Buffer.alloc(4 << 20));
      if (path === '/streamed-huge.png') {
        res.writeHead(200); // chunked: no length declared
        for (let i = 0; i < 8; i++) res.write(Buffer.alloc(512 << 10));
        return void res.end();
      }
      res.writeHead(404).end('no such image');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const addr = server.address();
    base = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  });
  afterAll(async () => {
    await new Promise((r) => server?.close(r));
  });

  it('fetches, bounds and classifies URL inputs', async () => {
    const out = join(fleet.tmp, 'out');
    // The server is on 127.0.0.1, which workers refuse by default (test/fleet-url-policy.test.ts).
    fleet.workers = [await startWorker(fleet.redis.url, 'urls', out, ['--max-fetch-bytes', String(1 << 20), '--allow-private-urls'])];
    const urls = ['good/page.png', 'missing.png', 'declared-huge.png', 'streamed-huge.png', 'flaky.png', 'down.png'].map((p) => `${base}/${p}`);
    const r = await tessera(['enqueue', '-', '--redis', fleet.redis.url, '--queue', 'urls', '--wait', '--attempts', '2', '--backoff-ms', '200'], urls.join('\n') + '\n');
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toMatch(/enqueued 6 new jobs/);
    expect(r.stdout).toMatch(/done: 2 of 6 completed, 4 failed/);
    expect(r.stdout).toContain(`failed ${base}/missing.png ERR_IMAGE_DECODE: cannot fetch image ${base}/missing.png: HTTP 404`);
    expect(r.stdout).toContain(`failed ${base}/declared-huge.png ERR_IMAGE_TOO_LARGE: `);
    expect(r.stdout).toContain(`failed ${base}/streamed-huge.png ERR_IMAGE_TOO_LARGE: `);
    expect(r.stdout).toContain(`failed ${base}/down.png ERR_IO: cannot fetch image ${base}/down.png: HTTP 503`);

    // Input errors are not retried; the 503s are, once (attempts 2).
    expect(hits.get('/missing.png')).toBe(1);
    expect(hits.get('/declared-huge.png')).toBe(1);
    expect(hits.get('/down.png')).toBe(2);
    expect(hits.get('/flaky.png')).toBe(2);
    const lines = fleet.workers[0]!.lines.filter((l) => l.type === 'job');
    expect(lines.filter((l) => l.input === `${base}/flaky.png`).map((l) => [l.event, l.final ?? null])).toEqual([['failed', false], ['completed', null]]);
    expect(lines.filter((l) => l.input === `${base}/down.png`).map((l) => [l.event, l.code, l.final])).toEqual([['failed', 'ERR_IO', false], ['failed', 'ERR_IO', true]]);

    // The fetched image's output is tower.encode of the same bytes, at the URL's path.
    await expectOutputsEqualEncode(join(fleet.tmp, 'images'), out, [join(fleet.tmp, 'images', 'good', 'page.png')]);
    const done = lines.find((l) => l.input === `${base}/good/page.png` && l.event === 'completed')!;
    expect(done.output).toBe(join(out, 'good', 'page.safetensors'));
  });
});
