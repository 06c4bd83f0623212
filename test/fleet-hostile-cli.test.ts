// The fleet commands under hostile conditions, as real processes against a real Redis:
// - a queue name BullMQ refuses (`a:b`) is a usage error of every command, exit 2, one line, no
//   stack trace, no hang; `--queue=-x` is a name like any other;
// - a refused password ends every command (ERR_IO, exit 2, the password masked);
// - a closed Redis port fails `enqueue` and `queue-status` at once (ERR_IO, exit 2, one line); a
//   Redis that accepts but never answers is waited for, and SIGTERM stops the wait; a worker
//   started before Redis waits for it, and SIGTERM stops it;
// - `enqueue` refuses inputs whose outputs would collide (a.png and a.jpg, one name under two
//   roots) before queueing anything;
// - Redis lost while `enqueue` adds 3,000 jobs: exit 2 with ERR_IO saying how many jobs are in
//   the queue, and the rerun adds exactly the rest.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect as netConnect, createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { HAVE_REDIS, MAIN, MODEL, ROOT, tessera, tesseraAsync, useFleet } from './helpers/fleet.js';
import { freePort } from './helpers/redis.js';

/** A TCP server on 127.0.0.1; `onSocket` decides what each connection gets. */
async function tcpServer(onSocket: (s: Socket) => void): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    onSocket(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : 0, sockets };
}

function closeServer(s: { server: Server; sockets: Set<Socket> }): Promise<void> {
  for (const sock of s.sockets) sock.destroy();
  return new Promise((r) => s.server.close(() => r()));
}

/** An input that exists: enqueue refuses a missing one before it reads its Redis flags. */
const IMAGE = join(ROOT, 'test', 'fixtures', 'images', 'tiny.png');
const noStack = (text: string) => expect(text).not.toMatch(/^\s+at /m);

describe.skipIf(!HAVE_REDIS)('fleet commands: hostile conditions', () => {
  const fleet = useFleet('hostile-cli');
  const servers: { server: Server; sockets: Set<Socket> }[] = [];
  afterAll(async () => {
    await Promise.all(servers.map(closeServer));
  });

  it("refuses a queue name BullMQ cannot take, in every command; accepts '--queue=-x'", async () => {
    const r = fleet.redis.url;
    const runs = await Promise.all([
      tessera(['enqueue', IMAGE, '--redis', r, '--queue', 'a:b']),
      tessera(['queue-status', '--redis', r, '--queue', 'a:b']),
      tessera(['worker', '--redis', r, '--queue', 'a:b', '--model', MODEL, '--out-dir', join(fleet.tmp, 'never')]),
    ]);
    for (const run of runs) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(/--queue 'a:b': a BullMQ queue name cannot contain ':'/);
      noStack(run.stderr);
    }
    mkdirSync(join(fleet.tmp, 'dash'), { recursive: true });
    writeFileSync(join(fleet.tmp, 'dash', 'p.png'), '');
    const e = await tessera(['enqueue', join(fleet.tmp, 'dash'), '--redis', r, '--queue=-x']);
    expect(e.code, e.stderr).toBe(0);
    expect(e.stdout).toMatch(/enqueued 1 new job on -x/);
    const s = await tessera(['queue-status', '--redis', r, '--queue=-x', '--json']);
    expect(s.code, s.stderr).toBe(0);
    expect(JSON.parse(s.stdout).counts.waiting).toBe(1);
  });

  it('fails at once on a closed Redis port, with one ERR_IO line', async () => {
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}`;
    for (const args of [['queue-status', '--redis', url, '--queue', 'q'], ['enqueue', IMAGE, '--redis', url, '--queue', 'q']]) {
      const run = await tessera(args);
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr.trim().split('\n')).toEqual([`tessera ${args[0]}: ERR_IO: cannot reach Redis at ${url}: connection refused (nothing listens on that port) (ECONNREFUSED)`]);
    }
  });

  it('ends every command on a refused password, with the password masked, exit 2', async () => {
    const url = fleet.redis.url.replace('redis://', 'redis://nobody:hunter2@');
    const runs = await Promise.all([
      tessera(['queue-status', '--redis', url, '--queue', 'q']),
      tessera(['enqueue', IMAGE, '--redis', url, '--queue', 'q']),
      tessera(['worker', '--redis', url, '--queue', 'q', '--model', MODEL, '--out-dir', join(fleet.tmp, 'refused')]),
    ]);
    for (const run of runs) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toMatch(/ERR_IO: Redis at redis:\/\/nobody:\*\*\*@127\.0\.0\.1:\d+ answered: WRONGPASS/);
      expect(run.stderr).not.toContain('hunter2');
      noStack(run.stderr);
    }
  });

  it('SIGTERM stops a command waiting for a Redis that never answers, and a worker waiting for Redis', async () => {
    // Accepts the connection, never answers: ioredis waits for its ready check.
    const silent = await tcpServer(() => undefined);
    servers.push(silent);
    const status = tesseraAsync(['queue-status', '--redis', `redis://127.0.0.1:${silent.port}`, '--queue', 'q']);
    while (silent.sockets.size === 0) await new Promise((r) => setTimeout(r, 50));
    status.proc.kill('SIGTERM');
    const s = await status.done;
    expect(s.code, s.stderr).toBe(130);
    expect(s.stderr).toMatch(/stopped: ERR_ABORTED: stopped while connecting to Redis/);

    const port = await freePort();
    const worker = spawn(process.execPath, [MAIN, 'worker', '--redis', `redis://127.0.0.1:${port}`, '--queue', 'q', '--model', MODEL, '--out-dir', join(fleet.tmp, 'waiting')], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    const exited = new Promise<number | null>((r) => worker.once('close', (code) => r(code)));
    await new Promise<void>((resolve) => worker.stderr!.on('data', (d: Buffer) => ((err += d.toString()), /ECONNREFUSED/.test(err) && resolve())));
    worker.kill('SIGTERM');
    expect(await exited, err).toBe(130);
    expect(err).toMatch(/stopped while waiting for Redis/);
  });

  it('refuses inputs whose outputs collide before queueing anything', async () => {
    const dir = join(fleet.tmp, 'collide');
    for (const f of ['one/a.png', 'one/a.jpg', 'one/b.png', 'two/b.png']) {
      mkdirSync(join(dir, f, '..'), { recursive: true });
      writeFileSync(join(dir, f), '');
    }
    const q = ['--redis', fleet.redis.url, '--queue', 'collide'];
    const same = await tessera(['enqueue', join(dir, 'one'), ...q]);
    expect(same.code, same.stderr).toBe(2);
    expect(same.stderr).toContain(`ERR_INVALID_ARGUMENT: ${join(dir, 'one', 'a.jpg')} and ${join(dir, 'one', 'a.png')} would both be written as a.*`);
    const roots = await tessera(['enqueue', join(dir, 'one', 'b.png'), join(dir, 'two', 'b.png'), ...q, '--group', '2']);
    expect(roots.code, roots.stderr).toBe(2);
    expect(roots.stderr).toContain(`${join(dir, 'one', 'b.png')} and ${join(dir, 'two', 'b.png')} would both be written as b.*`);
    const s = await tessera(['queue-status', ...q, '--json']);
    expect(JSON.parse(s.stdout).counts).toEqual({ waiting: 0, active: 0, delayed: 0, completed: 0, failed: 0 });
  });

  it('Redis lost mid-enqueue: says how many jobs are queued, and the rerun adds exactly the rest', async () => {
    // A proxy in front of Redis that cuts every connection once ~600 KB went through (a few
    // batches of jobs) and refuses new ones: Redis is gone for the enqueue.
    let forwarded = 0;
    const proxy: Awaited<ReturnType<typeof tcpServer>> = await tcpServer((client) => {
      const redis = netConnect(fleet.redis.port, '127.0.0.1');
      redis.on('error', () => undefined);
      client.on('data', (d: Buffer) => {
        forwarded += d.length;
        if (forwarded > 600_000) {
          void closeServer(proxy);
          redis.destroy();
          return;
        }
        redis.write(d);
      });
      redis.on('data', (d: Buffer) => client.write(d));
      redis.on('close', () => client.destroy());
      client.on('close', () => redis.destroy());
    });
    servers.push(proxy);
    const urls = Array.from({ length: 3000 }, (_, i) => `http://127.0.0.1:9/page-${i}.png`).join('\n') + '\n';
    const cut = await tessera(['enqueue', '-', '--redis', `redis://127.0.0.1:${proxy.port}`, '--queue', 'lost'], urls);
    expect(cut.code, cut.stderr).toBe(2);
    const m = /ERR_IO: lost the connection to Redis \([^)]*\): at least (\d+) of 3000 jobs are in the queue \((\d+) added now, 0 there before\)(?:; up to (\d+) more, of the batch being added when it broke off, may have landed too)?\. The jobs in the queue stay there; enqueueing the same inputs again adds exactly the rest/.exec(cut.stderr);
    expect(m, cut.stderr).not.toBeNull();
    const reported = Number(m![1]);
    const maybe = Number(m![3] ?? 0);
    expect(reported).toBeGreaterThan(0); // the cut fell in the middle of the run
    expect(reported).toBeLessThan(3000);

    const conn = new Redis(fleet.redis.url);
    const queue = new Queue('lost', { connection: conn });
    const queued = (await queue.getJobCounts('waiting')).waiting;
    expect(queued).toBeGreaterThanOrEqual(reported);
    expect(queued).toBeLessThanOrEqual(reported + maybe);
    const rerun = await tessera(['enqueue', '-', '--redis', fleet.redis.url, '--queue', 'lost'], urls);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stdout.trim()).toBe(`enqueued ${3000 - queued} new jobs on lost; ${queued} already there (waiting ${queued})`);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(3000);
    await queue.close();
    conn.disconnect();
  });
});
