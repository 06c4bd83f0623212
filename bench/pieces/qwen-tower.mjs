// Bench piece: the synthetic real-size Qwen3.5 tower on the CPU, one image per run, in a fresh
// child process per configuration so peak RSS is that configuration's own.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { makeSyntheticQwen } from '../make-synthetic-qwen.mjs';

/** FLOPs of one encode: linears 2·N·in·out, attention 4·n²·D per segment, merger on N/4 rows. */
export function qwenFlops(d, segments) {
  const N = segments.reduce((a, b) => a + b, 0);
  const K = 3 * 2 * 16 * 16, D = d.hidden, I = d.intermediate, O = d.out_hidden, W = 4 * D;
  const block = 2 * N * (D * 3 * D + D * D + 2 * D * I) + segments.reduce((a, n) => a + 4 * n * n * D, 0);
  return 2 * N * K * D + d.depth * block + 2 * (N / 4) * (W * W + W * O);
}

const CHILD = fileURLToPath(import.meta.url);

// Child: open, warm up once, time `runs` encodes of an h×w patch grid, print JSON.
async function child() {
  const [model, residency, h, w, runs, threads] = process.argv.slice(3);
  const { VisionTower } = await import('../../dist/index.js');
  const tower = await VisionTower.open(model, { backend: process.env['TESSERA_BENCH_BACKEND'] ?? 'cpu', residency, threads: Number(threads) });
  const n = Number(h) * Number(w);
  const px = new Float32Array(n * 1536);
  for (let i = 0; i < px.length; i++) px[i] = Math.sin(i * 0.37) * 0.9;
  const grid = { t: 1, h: Number(h), w: Number(w) };
  await tower.encodePixels({ pixelValues: px, grid });
  const ms = [];
  for (let r = 0; r < Number(runs); r++) {
    const t0 = performance.now();
    await tower.encodePixels({ pixelValues: px, grid });
    ms.push(performance.now() - t0);
  }
  const stats = tower.stats();
  await tower.close();
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({ ms: ms[Math.floor(ms.length / 2)], all: ms, maxRssMiB: process.resourceUsage().maxRSS / 1024, stats }));
}

export function runQwen({ model, residency = 'resident', h, w, runs = 3, threads = 0 }) {
  const r = spawnSync(process.execPath, [CHILD, '--child', model, residency, String(h), String(w), String(runs), String(threads)], {
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

export async function section() {
  const model = makeSyntheticQwen();
  const d = { depth: 27, hidden: 1152, intermediate: 4304, out_hidden: 3584 };
  const rows = [];
  for (const [label, h, w] of [['448×640 page', 28, 40], ['1024×1024 image', 64, 64]]) {
    const r = runQwen({ model, h, w, runs: 3 });
    const gflop = qwenFlops(d, [h * w]) / 1e9;
    rows.push(`| ${label} | ${h * w} | ${r.ms.toFixed(0)} | ${gflop.toFixed(1)} | ${(gflop / (r.ms / 1000)).toFixed(1)} | ${r.maxRssMiB.toFixed(0)} |`);
  }
  return {
    title: `Qwen3.5-size tower, backend ${process.env['TESSERA_BENCH_BACKEND'] ?? 'cpu'} (resident, bf16 weights)`,
    body: [
      'Synthetic tower (27 blocks, hidden 1152, 16 heads of 72, MLP 4304, out 3584; random bf16 weights, `bench/make-synthetic-qwen.mjs`), `encodePixels` of one image, median of 3 after a warm-up, all cores, fresh process per row.',
      '',
      '| input | patches | ms / image | GFLOP | GFLOP/s | peak RSS MiB |',
      '| --- | --- | --- | --- | --- | --- |',
      ...rows,
    ].join('\n'),
  };
}

if (process.argv[2] === '--child') await child();
