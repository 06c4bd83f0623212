// A real redis-server for the fleet tests: started on 127.0.0.1 and a free port, in its own temp
// folder, stopped (and the folder removed) by stop(). By default nothing is persisted
// (`--save "" --appendonly no`); the Redis-restart scenario asks for `durable`, an append-only
// file fsync'ed on every write (what docs/fleet.md recommends for production), so a crash and a
// restart on the same port lose no acknowledged write.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// BullMQ refuses a Redis older than 5.0 (its RedisConnection.minimumVersion).
const REDIS_MIN: [number, number] = [5, 0];

/** Why the fleet tests cannot run here (no redis-server on PATH, or one older than BullMQ accepts), or null. */
function redisSkipReason(): string | null {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (r.status !== 0 || !/Redis server/.test(r.stdout)) return 'redis-server is not installed (Debian: apt-get install redis-server): the fleet tests need a real Redis and are skipped';
  const v = /v=(\d+)\.(\d+)/.exec(r.stdout);
  const [major, minor] = v ? [Number(v[1]), Number(v[2])] : [0, 0];
  if (major < REDIS_MIN[0] || (major === REDIS_MIN[0] && minor < REDIS_MIN[1]))
    return `redis-server ${v ? `${major}.${minor}` : '(version unknown)'} is older than BullMQ's minimum ${REDIS_MIN.join('.')} (Debian: apt-get install redis-server): the fleet tests are skipped`;
  return null;
}

const REDIS_SKIP = redisSkipReason();

/** Whether a redis-server BullMQ accepts is on PATH; the fleet tests skip (saying so) when not. */
export function redisServerAvailable(): boolean {
  return REDIS_SKIP === null;
}

export const REDIS_MISSING = REDIS_SKIP ?? '';

/** A port nobody listens on right now (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export interface RedisServer {
  port: number;
  url: string;
  /** Ends the server with SIGKILL (a crash: nothing is flushed beyond what `durable` already fsync'ed). */
  kill(): Promise<void>;
  /** Starts it again on the same port and folder. */
  start(): Promise<void>;
  /** Stops it and removes its folder. */
  stop(): Promise<void>;
}

function waitForReady(proc: ChildProcess, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let log = '';
    const timer = setTimeout(() => reject(new Error(`redis-server on port ${port} did not start:\n${log}`)), 20_000);
    const onData = (d: Buffer) => {
      log += d.toString();
      if (/Ready to accept connections/.test(log)) {
        clearTimeout(timer);
        proc.stdout?.off('data', onData);
        proc.stdout?.resume(); // keep draining
        resolve();
      }
    };
    proc.stdout?.on('data', onData);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server on port ${port} exited with ${code}:\n${log}`));
    });
  });
}

function exited(proc: ChildProcess): Promise<void> {
  return proc.exitCode !== null || proc.signalCode !== null ? Promise.resolve() : new Promise((r) => proc.once('exit', () => r()));
}

export async function startRedis(opts: { durable?: boolean } = {}): Promise<RedisServer> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'tessera-redis-'));
  const persistence = opts.durable
    ? ['--save', '', '--appendonly', 'yes', '--appendfsync', 'always']
    : ['--save', '', '--appendonly', 'no'];
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...persistence, '--maxmemory-policy', 'noeviction', '--loglevel', 'notice'];
  let proc: ChildProcess | undefined;
  const start = async () => {
    proc = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stderr?.resume();
    await waitForReady(proc, port);
  };
  const kill = async () => {
    if (!proc) return;
    const p = proc;
    proc = undefined;
    p.kill('SIGKILL');
    await exited(p);
  };
  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    start,
    stop: async () => {
      if (proc) {
        const p = proc;
        proc = undefined;
        p.kill('SIGTERM');
        const timer = setTimeout(() => p.kill('SIGKILL'), 5000);
        await exited(p);
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
