// Fleet throughput on this machine (docs/fleet.md, "How many workers per machine"): the same
// images through one `tessera encode --out-dir` process, then through 1, 2 and 3 `tessera worker`
// processes on a local redis-server (timed from the enqueue to the last completion; the workers are
// started and their towers open before). Every run writes a fresh out-dir, so nothing is skipped.
//
//   node bench/pieces/fleet.mjs [--images N] [--tower tiny|small] [--repeat R]
//
// tiny: the test fixture tower (3 blocks, hidden 64): per-image overhead dominates.
// small: a synthetic Qwen3.5-shaped tower (8 blocks, hidden 384, RANDOM weights), written to
// bench/out/ on first use: the encode is most of the time.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');
const { values } = parseArgs({ options: { images: { type: 'string' }, tower: { type: 'string' }, repeat: { type: 'string' } } });
const N = Number(values.images ?? 60);
const REPEAT = Number(values.repeat ?? 1);
const towerKind = values.tower ?? 'small';

async function towerPath() {
  if (towerKind === 'tiny') return join(ROOT, 'test', 'fixtures', 'qwen3_5-tiny', 'model');
  const dir = join(ROOT, 'bench', 'out', 'qwen3_5-small-random');
  if (!existsSync(join(dir, 'model.safetensors'))) {
    const { writeQwenFolder } = await import(join(ROOT, 'dist', 'synthetic.js'));
    writeQwenFolder(dir, { depth: 8, hidden_size: 384, num_heads: 6, intermediate_size: 1536, out_hidden_size: 1024 }, { minPixels: 65536, maxPixels: 262144 });
  }
  return dir;
}

function run(args, opts = {}) {
  return new Promise((resolve) => {
    const p = spawn(opts.cmd ?? process.execPath, opts.cmd ? args : [MAIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => {
      out += d;
      opts.onOut?.(d.toString());
    });
    p.stderr.on('data', (d) => (err += d));
    if (opts.keep) return resolve(p);
    p.on('close', (code) => resolve({ code, out, err }));
  });
}

async function startRedis(dir) {
  const net = await import('node:net');
  const port = await new Promise((r) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => r(p));
    });
  });
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'ignore'] });
  await new Promise((r) => proc.stdout.on('data', (d) => /Ready to accept/.test(d) && r()));
  return { url: `redis://127.0.0.1:${port}`, stop: () => proc.kill('SIGTERM') };
}

async function makeImages(dir) {
  mkdirSync(dir, { recursive: true });
  for (let i = 0; i < N; i++) {
    const w = 480 + ((i * 37) % 160);
    const h = 360 + ((i * 53) % 120);
    const raw = Buffer.alloc(w * h * 3);
    for (let p = 0; p < w * h; p++) (raw[p * 3] = (p * (i + 7)) & 255), (raw[p * 3 + 1] = (p >> 4) & 255), (raw[p * 3 + 2] = (i * 11) & 255);
    await sharp(raw, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 85 }).toFile(join(dir, `page-${String(i).padStart(4, '0')}.jpg`));
  }
}

async function timeEncode(model, images, out) {
  const t0 = performance.now();
  const r = await run(['encode', images, '--model', model, '--out-dir', out]);
  if (r.code !== 0) throw new Error(`encode failed: ${r.err}`);
  return (performance.now() - t0) / 1000;
}

async function timeWorkers(model, images, out, redis, n, extra, queue) {
  const workers = [];
  for (let i = 0; i < n; i++) {
    let ready;
    const isReady = new Promise((r) => (ready = r));
    const p = await run(['worker', '--redis', redis.url, '--queue', queue, '--model', model, '--out-dir', out, ...extra], { keep: true, onOut: (t) => /ready/.test(t) && ready() });
    workers.push(p);
    await isReady;
  }
  const t0 = performance.now();
  const r = await run(['enqueue', images, '--redis', redis.url, '--queue', queue, '--wait']);
  const s = (performance.now() - t0) / 1000;
  if (r.code !== 0) throw new Error(`enqueue failed: ${r.out}${r.err}`);
  await Promise.all(workers.map((p) => new Promise((r) => (p.on('close', r), p.kill('SIGTERM')))));
  return s;
}

const tmp = mkdtempSync(join(tmpdir(), 'tessera-bench-fleet-'));
try {
  const model = await towerPath();
  const images = join(tmp, 'images');
  await makeImages(images);
  const redis = await startRedis(tmp);
  const configs = [
    ['encode --out-dir (1 process)', (k) => timeEncode(model, images, join(tmp, `enc-${k}`))],
    ['1 worker', (k) => timeWorkers(model, images, join(tmp, `w1-${k}`), redis, 1, [], `w1-${k}`)],
    ['2 workers', (k) => timeWorkers(model, images, join(tmp, `w2-${k}`), redis, 2, [], `w2-${k}`)],
    ['2 workers, --threads 1 each', (k) => timeWorkers(model, images, join(tmp, `w2t-${k}`), redis, 2, ['--threads', '1'], `w2t-${k}`)],
    ['3 workers', (k) => timeWorkers(model, images, join(tmp, `w3-${k}`), redis, 3, [], `w3-${k}`)],
  ];
  console.log(`${N} JPEG pages 480-640 x 360-480, tower ${towerKind}, ${cpus().length} logical CPUs, load average at start ${loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  console.log('| run | images/s (each repeat) |\n| --- | --- |');
  for (const [name, f] of configs) {
    const rates = [];
    for (let k = 0; k < REPEAT; k++) rates.push(N / (await f(k)));
    console.log(`| ${name} | ${rates.map((r) => r.toFixed(2)).join(', ')} |`);
  }
  console.log(`load average at end ${loadavg().map((v) => v.toFixed(1)).join(' ')}`);
  redis.stop();
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
