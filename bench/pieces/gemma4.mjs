// Bench piece: the synthetic 26B/31B-style Gemma 4 tower + projector on the CPU at the 280 and 1120
// soft-token budgets (one 448×640 image, sized as HF's processor does: docs/models/gemma4-vision.md#sizing),
// in a fresh child process per configuration so peak RSS is that configuration's own.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { GEMMA4_LARGE, makeSyntheticGemma4 } from '../make-synthetic-gemma4.mjs';

/**
 * FLOPs of one encode of N patches (N/9 soft tokens): per block the seven linears 2·N·(4·D·Q + 3·D·F)
 * and attention 4·N²·Q (q·kᵀ and p·v); the patch embedding 2·N·768·D; the projector 2·(N/9)·D·T.
 * Norms, rope, pooling and the position tables are O(N·D) and left out.
 */
export function gemma4Flops(v, n) {
  const D = v.hidden_size, F = v.intermediate_size, Q = v.num_attention_heads * v.head_dim;
  const block = 2 * n * (4 * D * Q + 3 * D * F) + 4 * n * n * Q;
  return 2 * n * 768 * D + v.num_hidden_layers * block + 2 * (n / 9) * D * v.text_hidden;
}

const CHILD = fileURLToPath(import.meta.url);

// Child: open, optionally warm up, time `runs` encodes of a wp×hp patch grid, print JSON.
async function child() {
  const [model, residency, wp, hp, runs, warmup, threads] = process.argv.slice(3);
  const { VisionTower } = await import('../../dist/index.js');
  const tower = await VisionTower.open(model, { backend: process.env['TESSERA_BENCH_BACKEND'] ?? 'cpu', residency, threads: Number(threads) });
  const W = Number(wp), H = Number(hp), n = W * H;
  const pixelValues = new Float32Array(n * 768);
  for (let i = 0; i < pixelValues.length; i++) pixelValues[i] = 0.5 + Math.sin(i * 0.37) * 0.45;
  const positions = new Int32Array(n * 2);
  for (let r = 0; r < H; r++) for (let c = 0; c < W; c++) positions.set([c, r], 2 * (r * W + c));
  if (warmup === '1') await tower.encodePixels({ pixelValues, positions });
  const ms = [];
  for (let r = 0; r < Number(runs); r++) {
    const t0 = performance.now();
    await tower.encodePixels({ pixelValues, positions });
    ms.push(performance.now() - t0);
  }
  await tower.close();
  ms.sort((a, b) => a - b);
  console.log(JSON.stringify({ ms: ms[Math.floor(ms.length / 2)], all: ms, maxRssMiB: process.resourceUsage().maxRSS / 1024 }));
}

export function runGemma4({ model, residency = 'resident', wp, hp, runs = 1, warmup = false, threads = 0 }) {
  const r = spawnSync(
    process.execPath,
    [CHILD, '--child', model, residency, String(wp), String(hp), String(runs), warmup ? '1' : '0', String(threads)],
    { encoding: 'utf8', maxBuffer: 1 << 24 },
  );
  if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

// A 448×640 (W×H) image at each budget: 280 → 960×672 px = 42×60 patches; 1120 → 1920×1344 px = 84×120.
const CASES = [
  { budget: 280, wp: 42, hp: 60, runs: 3, warmup: true },
  { budget: 1120, wp: 84, hp: 120, runs: 1, warmup: false },
];

export async function section() {
  const model = makeSyntheticGemma4();
  const rows = [];
  for (const c of CASES) {
    const r = runGemma4({ model, wp: c.wp, hp: c.hp, runs: c.runs, warmup: c.warmup });
    const n = c.wp * c.hp;
    const gflop = gemma4Flops(GEMMA4_LARGE, n) / 1e9;
    rows.push(
      `| ${c.budget} | ${n} | ${n / 9} | ${r.ms.toFixed(0)} | ${gflop.toFixed(0)} | ${(gflop / (r.ms / 1000)).toFixed(1)} | ${r.maxRssMiB.toFixed(0)} |`,
    );
  }
  return {
    title: `Gemma 4 26B/31B-size vision tower + projector, backend ${process.env['TESSERA_BENCH_BACKEND'] ?? 'cpu'} (resident, bf16 weights)`,
    body: [
      'Synthetic tower (27 blocks, hidden 1152, 16 heads of 72, MLP 4304, standardisation on, projection to 2816; random bf16 weights, `bench/make-synthetic-gemma4.mjs`), `encodePixels` of one 448×640 image at the budget, all cores, fresh process per row. 280: median of 3 after a warm-up; 1120: one run, no warm-up (it takes minutes on 2 cores).',
      '',
      '| soft-token budget | patches | tokens | ms / image | GFLOP | GFLOP/s | peak RSS MiB |',
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...rows,
    ].join('\n'),
  };
}

if (process.argv[2] === '--child') await child();
