// Shared by the fleet tests: the CLI as real child processes (node dist/cli/main.js worker /
// enqueue / queue-status), images made for a run (good ones all distinct, bad ones each failing
// with a known code), and the check that a run's outputs are tower.encode's, bit for bit.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, expect } from 'vitest';
import { VisionTower } from '../../src/index.js';
import { readSafetensors } from './images.js';
import { REDIS_MISSING, redisServerAvailable, startRedis, type RedisServer } from './redis.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const MAIN = join(ROOT, 'dist', 'cli', 'main.js');
export const MODEL = join(ROOT, 'test', 'fixtures', 'qwen3_5-tiny', 'model');

function newestMtime(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** The workers run dist/ as installed: compile the sources when dist/ is older than them. */
/** Whether the fleet tests can run (a real redis-server on the PATH); they say so once when not. */
export const HAVE_REDIS = redisServerAvailable();
if (!HAVE_REDIS) console.warn(REDIS_MISSING);

/** What a fleet describe block shares: its Redis server, a scratch folder, the workers it started. */
export interface Fleet {
  redis: RedisServer;
  tmp: string;
  workers: WorkerProcess[];
}

/**
 * Called inside a describe: before its tests, the CLI built, a scratch folder and a fresh Redis on a
 * free port; after them, every worker in `workers` killed, Redis stopped, the folder removed.
 */
export function useFleet(name: string, redisOptions: { durable?: boolean } = {}): Fleet {
  const f = { tmp: '', workers: [] } as unknown as Fleet;
  beforeAll(async () => {
    ensureDist();
    f.tmp = mkdtempSync(join(tmpdir(), `tessera-fleet-${name}-`));
    f.redis = await startRedis(redisOptions);
  });
  afterAll(async () => {
    await Promise.all(f.workers.map(killWorker));
    await f.redis?.stop();
    if (f.tmp) rmSync(f.tmp, { recursive: true, force: true });
  });
  return f;
}

export function ensureDist(): void {
  let built = 0;
  try {
    built = statSync(MAIN).mtimeMs;
  } catch {
    // not built yet
  }
  if (built >= newestMtime(join(ROOT, 'src'))) return;
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
}

export interface JobLine {
  type: string;
  event: string;
  jobId?: string;
  input?: string;
  code?: string;
  final?: boolean;
  status?: string;
  output?: string;
  sha256?: string;
  worker?: { name: string; pid: number; jobs: number; images: number; imagesPerSecond: number; failures: Record<string, number> };
  [k: string]: unknown;
}

export interface WorkerProcess {
  proc: ChildProcess;
  pid: number;
  /** Every JSON line it printed so far. */
  lines: JobLine[];
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first line (already printed or to come) that matches. */
  waitFor(match: (l: JobLine) => boolean, timeoutMs?: number): Promise<JobLine>;
}

/** `tessera worker --json ...` as a child process; resolves once it says it is ready. */
export async function startWorker(redisUrl: string, queue: string, outDir: string, extra: string[] = []): Promise<WorkerProcess> {
  const proc = spawn(process.execPath, [MAIN, 'worker', '--redis', redisUrl, '--queue', queue, '--model', MODEL, '--out-dir', outDir, '--json', ...extra], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: JobLine[] = [];
  const waiters: { match: (l: JobLine) => boolean; resolve: (l: JobLine) => void }[] = [];
  let buffered = '';
  let err = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buffered += d.toString();
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const text = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!text.trim()) continue;
      const line = JSON.parse(text) as JobLine;
      lines.push(line);
      for (const w of [...waiters]) if (w.match(line)) waiters.splice(waiters.indexOf(w), 1), w.resolve(line);
    }
  });
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  // 'close', not 'exit': by then every line it printed has been read.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.once('close', (code, signal) => r({ code, signal })));
  const waitFor = (match: (l: JobLine) => boolean, timeoutMs = 60_000) =>
    new Promise<JobLine>((resolve, reject) => {
      const found = lines.find(match);
      if (found) return resolve(found);
      const timer = setTimeout(() => reject(new Error(`worker ${proc.pid}: no matching line within ${timeoutMs} ms; stderr:\n${err}`)), timeoutMs);
      waiters.push({ match, resolve: (l) => (clearTimeout(timer), resolve(l)) });
      void exited.then(({ code, signal }) => reject(new Error(`worker ${proc.pid} exited (${code ?? signal}) before a matching line; stderr:\n${err}`)));
    });
  const w: WorkerProcess = { proc, pid: proc.pid!, lines, stderr: () => err, exited, waitFor };
  await waitFor((l) => l.type === 'worker' && l.event === 'ready');
  return w;
}

/** Ends a worker if it is still running (SIGKILL: the tests that mean SIGTERM send it themselves). */
export async function killWorker(w: WorkerProcess): Promise<void> {
  if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGKILL');
  await w.exited;
}

/**
 * `tessera <args>` run to the end, asynchronously: the test process keeps reading the workers'
 * output (and serving HTTP) meanwhile. A blocking spawnSync would stall both, and a worker
 * whose stdout pipe fills up blocks on its next log line.
 */
export function tessera(args: string[], input?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return tesseraAsync(args, input).done;
}

/** `tessera <args>` started in the background; resolves with its exit code and output. */
export function tesseraAsync(args: string[], input?: string): { proc: ChildProcess; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const proc = spawn(process.execPath, [MAIN, ...args], { cwd: ROOT, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  if (input !== undefined) proc.stdin!.end(input);
  let stdout = '';
  let stderr = '';
  proc.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill('SIGKILL'), 150_000);
  return {
    proc,
    done: new Promise((r) =>
      proc.once('close', (code) => {
        clearTimeout(timer);
        r({ code, stdout, stderr });
      }),
    ),
  };
}

export function jsonLines(text: string): Record<string, unknown>[] {
  return text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Bad inputs and the code each must fail with. */
export const BAD_IMAGES: Record<string, string> = {
  'bad/garbage.png': 'ERR_IMAGE_DECODE',
  'bad/truncated.png': 'ERR_IMAGE_DECODE',
  'bad/too-thin.png': 'ERR_IMAGE_ASPECT',
};

/**
 * `good` distinct PNGs (sizes and colours differ, so each encodes differently) under dir/good/
 * (some nested one level), and the bad ones of BAD_IMAGES. Returns the good paths.
 */
export async function makeImages(dir: string, good: number, withBad = true): Promise<string[]> {
  const paths: string[] = [];
  for (let i = 0; i < good; i++) {
    const w = 48 + ((i * 13) % 80);
    const h = 40 + ((i * 29) % 72);
    const raw = Buffer.alloc(w * h * 3);
    for (let p = 0; p < w * h; p++) {
      raw[p * 3] = (p * (i + 3)) & 255;
      raw[p * 3 + 1] = (p >> 3) & 255;
      raw[p * 3 + 2] = (i * 37) & 255;
    }
    const path = join(dir, 'good', i % 4 === 0 ? 'nested' : '', `img-${String(i).padStart(3, '0')}.png`);
    await sharp(raw, { raw: { width: w, height: h, channels: 3 } }).png().toFile(await ensureParent(path));
    paths.push(path);
  }
  if (withBad) {
    const png = await sharp({ create: { width: 64, height: 64, channels: 3, background: { r: 200, g: 10, b: 10 } } }).png().toBuffer();
    writeFileSync(await ensureParent(join(dir, 'bad/garbage.png')), 'not an image at all');
    writeFileSync(join(dir, 'bad/truncated.png'), png.subarray(0, Math.floor(png.length / 2)));
    await sharp({ create: { width: 2, height: 600, channels: 3, background: { r: 0, g: 0, b: 255 } } }).png().toFile(join(dir, 'bad/too-thin.png'));
  }
  return paths.sort();
}

async function ensureParent(path: string): Promise<string> {
  const { mkdir } = await import('node:fs/promises');
  await mkdir(join(path, '..'), { recursive: true });
  return path;
}

/** A solid-ish image big enough that its encode takes a while (the signal tests aim at it). */
export async function makeBigImage(path: string, side = 2048): Promise<void> {
  const raw = Buffer.alloc(side * side * 3);
  for (let p = 0; p < side * side; p++) (raw[p * 3] = p & 255), (raw[p * 3 + 1] = (p >> 11) & 255), (raw[p * 3 + 2] = 99);
  await ensureParent(path);
  await sharp(raw, { raw: { width: side, height: side, channels: 3 } }).png({ compressionLevel: 1 }).toFile(path);
}

/**
 * Every good image's output under outDir (at its path relative to root, .safetensors) holds
 * exactly tower.encode's embeddings and grid (of `model`'s tower), bit for bit.
 */
export async function expectOutputsEqualEncode(root: string, outDir: string, images: readonly string[], options: Record<string, number> = {}, model = MODEL): Promise<void> {
  const tower = await VisionTower.open(model, { backend: 'cpu' });
  try {
    for (const img of images) {
      const out = join(outDir, relative(root, img).replace(/\.[^./]+$/, '') + '.safetensors');
      const t = readSafetensors(out);
      const r = await tower.encode(img, options);
      expect(t['embeddings']!.shape, out).toEqual([r.tokens, r.width]);
      expect(Buffer.from(t['embeddings']!.bytes).equals(Buffer.from(r.embeddings.buffer, r.embeddings.byteOffset, r.embeddings.byteLength)), out).toBe(true);
      expect(Array.from(new BigInt64Array(new Uint8Array(t['grid_thw']!.bytes).buffer), Number)).toEqual(r.grid!.flatMap((g) => [g.t, g.h, g.w]));
    }
  } finally {
    await tower.close();
  }
}

/** Completed and final-failed lines per input, over every worker's log. */
export function outcomes(workers: readonly WorkerProcess[]): { completed: Map<string, JobLine[]>; failed: Map<string, JobLine[]> } {
  const completed = new Map<string, JobLine[]>();
  const failed = new Map<string, JobLine[]>();
  for (const w of workers)
    for (const l of w.lines) {
      if (l.type !== 'job') continue;
      const m = l.event === 'completed' ? completed : l.event === 'failed' && l.final ? failed : undefined;
      if (m) m.set(l.input!, [...(m.get(l.input!) ?? []), l]);
    }
  return { completed, failed };
}

/**
 * outcomes() once the workers have logged `total` outcomes: a worker prints its line after Redis
 * recorded the outcome, so `enqueue --wait` may see the end a moment before the last line arrives.
 */
export async function settledOutcomes(workers: readonly WorkerProcess[], total: number, timeoutMs = 30_000): Promise<ReturnType<typeof outcomes>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const o = outcomes(workers);
    let n = 0;
    for (const v of [...o.completed.values(), ...o.failed.values()]) n += v.length;
    if (n >= total || Date.now() > until) return o;
    await new Promise((r) => setTimeout(r, 50));
  }
}
