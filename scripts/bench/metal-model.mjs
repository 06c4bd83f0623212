// Bench piece: a cost model of the Metal backend, not a measurement (docs/metal.md#cost-model). The real
// kernels run through the real op layer on the MSL emulator (`metal-emulated`), which counts what every
// dispatch does (docs/metal-on-linux.md#counters); each dispatch's time on an Apple GPU is then the slowest
// of three roofs (compute, device bandwidth, threadgroup bandwidth). The model and the GPU figures with their
// sources are the library's: src/metal/cost-model.ts (tessera doctor uses them too).
//
// The towers: the synthetic real-size Qwen3.5 at 1024x1024 (4,096 patches) and Gemma 4 at the 280-token
// budget (2,520 patches). The emulator counts one threadgroup per grid class (TESSERA_MSLEMU_COUNT_CLASSES:
// first and last group per grid dimension, weighted; exact for these kernels, see the docs) so that whole
// real-size towers are countable on a small machine; the outputs are then not computed.
//
//   npm run bench -- metal-model          (writes its section of BENCHMARKS.md; last line: the headline)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeSyntheticGemma4 } from '../make-synthetic-gemma4.mjs';
import { makeSyntheticQwen } from '../make-synthetic-qwen.mjs';
import { ALUS_PER_CORE, GPUS, TG_BYTES_PER_CYCLE, estimate, fp32Tflops } from '../../dist/metal/cost-model.js';

const CHILD = fileURLToPath(import.meta.url);

// What the previous kernels (main before issue 19: 32x32 GEMM tiles staged per element, attention of 4 query
// rows per threadgroup with a scalar score loop) gave in this same model: this script run once on them, at
// commit 3d68fc2 (the counters, with the old kernels). To recompute: check out that commit's metal/ and
// native/metal/ops/, rebuild (npx node-gyp build, node tools/mslemu/build.mjs), npm run bench -- metal-model.
const BEFORE = {"qwen3_5 1024x1024": {"M1": 20.315, "M2 Max": 3.626, "M3 Max": 3.487, "M4 Max": 2.82, "deviceGB": 1386.5, "tgGB": 10732.0}, "gemma4 280 tokens": {"M1": 9.89, "M2 Max": 1.749, "M3 Max": 1.697, "M4 Max": 1.343, "deviceGB": 675.0, "tgGB": 4619.4}};

// Child: open the tower on metal-emulated in `precision` and encode once (the parent set the counting environment).
async function child() {
  const [family, model, a, b, precision] = process.argv.slice(3);
  const { VisionTower } = await import('../../dist/index.js');
  const tower = await VisionTower.open(model, { backend: 'metal-emulated', precision });
  if (tower.info.precision !== precision) throw new Error(`asked for ${precision}, ${tower.info.precision} ran`);
  const n = Number(a) * Number(b);
  if (family === 'qwen3_5') {
    const px = new Float32Array(n * 1536);
    for (let i = 0; i < px.length; i++) px[i] = Math.sin(i * 0.37) * 0.9;
    await tower.encodePixels({ pixelValues: px, grid: { t: 1, h: Number(a), w: Number(b) } }, { checkFinite: false });
  } else {
    const W = Number(a), H = Number(b);
    const px = new Float32Array(n * 768);
    for (let i = 0; i < px.length; i++) px[i] = 0.5 + Math.sin(i * 0.37) * 0.45;
    const positions = new Int32Array(n * 2);
    for (let r = 0; r < H; r++) for (let c = 0; c < W; c++) positions.set([c, r], 2 * (r * W + c));
    await tower.encodePixels({ pixelValues: px, positions }, { checkFinite: false });
  }
  await tower.close();
}

/** Every dispatch's counts of one encode of `family` in `precision` ('f32' or 'f16'; one child process). */
export function countTower(family, model, a, b, precision = 'f32') {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-metal-model-'));
  const file = join(dir, 'counts.jsonl');
  try {
    const r = spawnSync(process.execPath, [CHILD, '--child', family, model, String(a), String(b), precision], {
      encoding: 'utf8', maxBuffer: 1 << 24,
      env: { ...process.env, TESSERA_MSLEMU_COUNTS: file, TESSERA_MSLEMU_COUNT_CLASSES: '1' },
    });
    if (r.status !== 0) throw new Error(`metal-model child failed: ${r.stderr}`);
    return readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const TOWERS = [
  { family: 'qwen3_5', label: 'qwen3_5 1024x1024', what: 'Qwen3.5-size tower, one 1024×1024 image (64×64 = 4,096 patches)', a: 64, b: 64, model: () => makeSyntheticQwen() },
  { family: 'gemma4', label: 'gemma4 280 tokens', what: 'Gemma 4 26B/31B-size tower + projector, 280-token budget (42×60 = 2,520 patches)', a: 42, b: 60, model: () => makeSyntheticGemma4() },
];

const fmt = (s) => (s >= 1 ? s.toFixed(2) : s.toFixed(3));

export async function section() {
  const { build } = await import('../../tools/mslemu/build.mjs');
  const st = await build({ quiet: true });
  if (!st.available) throw new Error(`metal-model needs the MSL emulator: ${st.reason}`);
  const lines = [];
  const results = {}, half = {};
  const count = (t, precision) => {
    process.stderr.write(`metal-model: counting ${t.label} in ${precision} ...\n`);
    const counts = countTower(t.family, t.model(), t.a, t.b, precision);
    const r = { counts, est: Object.fromEntries(GPUS.map((g) => [g.name, estimate(counts, g)])) };
    const tot = counts.reduce((a, d) => ({ dev: a.dev + d.dev_read + d.dev_write, tg: a.tg + d.tg_read + d.tg_write, mma: a.mma + d.mma }), { dev: 0, tg: 0, mma: 0 });
    r.totals = tot;
    process.stderr.write(`metal-model: ${t.label} ${precision}: ${counts.length} dispatches, device ${(tot.dev / 1e9).toFixed(2)} GB, threadgroup ${(tot.tg / 1e9).toFixed(2)} GB, ${(tot.mma * 1024 / 1e12).toFixed(2)} TFLOP in simdgroup matrices\n`);
    return r;
  };
  for (const t of TOWERS) {
    results[t.label] = count(t, 'f32');
    half[t.label] = count(t, 'f16');  // precision 'f16': half activations and tiles (docs/metal.md#half-precision)
  }
  lines.push('**A model, not a measurement.** No Mac has run these kernels; every figure below is computed from what the emulator counted (exact bytes and operations of each dispatch) and published GPU figures, as the slowest of three roofs per dispatch: compute (simdgroup MACs × 512 + scalar FMAs + other ALU ops + 4 × special functions, at 128 lane-ops per core per cycle), device bandwidth (every device byte at DRAM speed: caches not modelled) and threadgroup-memory bandwidth (64 B per core per cycle, an assumption). Launch overhead, latency and occupancy are not modelled. `npm run test:metal` on a Mac prints the measured time beside this estimate. Every dispatch of each whole tower is counted, one threadgroup per grid class and weighted (exact for these kernels: docs/metal-on-linux.md#counters). "before": the previous kernels (32x32 GEMM tiles, 4-row attention; commit 3d68fc2), counted once by this same script and recorded in it.');
  lines.push('');
  lines.push('| GPU | cores | GHz | FP32 TFLOPS | GB/s | ' + TOWERS.map((t) => `${t.label}: before (s) | after (s)`).join(' | ') + ' |');
  lines.push('| --- | --- | --- | --- | --- | ' + TOWERS.map(() => '--- | ---').join(' | ') + ' |');
  for (const g of GPUS) {
    const cells = TOWERS.map((t) => `${BEFORE[t.label]?.[g.name] !== undefined ? fmt(BEFORE[t.label][g.name]) : 'n/a'} | ${fmt(results[t.label].est[g.name].s)}`);
    lines.push(`| ${g.name} | ${g.cores} | ${g.ghz} | ${fp32Tflops(g).toFixed(1)} | ${g.bandwidthGBs} | ${cells.join(' | ')} |`);
  }
  lines.push('');
  lines.push("Precision 'f16' beside f32 (the same kernels' half variants: activations stored as half between ops, half GEMM and attention tiles, float accumulators; docs/metal.md#half-precision):");
  lines.push('');
  lines.push('| tower | f32 device GB | f16 device GB | f16 / f32 | f32 threadgroup GB | f16 threadgroup GB | ' + GPUS.map((g) => `${g.name} f32 / f16 (s)`).join(' | ') + ' | M4 Max f16 / f32 |');
  lines.push('| --- | --- | --- | --- | --- | --- | ' + GPUS.map(() => '---').join(' | ') + ' | --- |');
  for (const t of TOWERS) {
    const a = results[t.label], h = half[t.label];
    lines.push(`| ${t.label} | ${(a.totals.dev / 1e9).toFixed(2)} | ${(h.totals.dev / 1e9).toFixed(2)} | ${(h.totals.dev / a.totals.dev).toFixed(2)}x | ${(a.totals.tg / 1e9).toFixed(2)} | ${(h.totals.tg / 1e9).toFixed(2)} | ` +
      GPUS.map((g) => `${fmt(a.est[g.name].s)} / ${fmt(h.est[g.name].s)}`).join(' | ') + ` | ${(h.est['M4 Max'].s / a.est['M4 Max'].s).toFixed(2)}x |`);
  }
  lines.push('');
  for (const t of TOWERS) {
    const r = results[t.label];
    const b = BEFORE[t.label];
    lines.push(`${t.what}: ${r.counts.length} dispatches, device traffic ${(r.totals.dev / 1e9).toFixed(2)} GB${b ? ` (before: ${b.deviceGB} GB)` : ''}, threadgroup traffic ${(r.totals.tg / 1e9).toFixed(2)} GB${b ? ` (before: ${b.tgGB} GB)` : ''}. Per kernel on M4 Max:`);
    lines.push('');
    lines.push('| kernel | dispatches | device GB | threadgroup GB | G lane-ops | model s | bound by |');
    lines.push('| --- | --- | --- | --- | --- | --- | --- |');
    const per = [...r.est['M4 Max'].perKernel.entries()].sort((x, y) => y[1].s - x[1].s);
    for (const [name, k] of per) {
      const bound = Object.entries(k.bounds).sort((x, y) => y[1] - x[1]).map(([n, s]) => `${n} ${Math.round((100 * s) / k.s)} %`).join(', ');
      lines.push(`| ${name} | ${k.dispatches} | ${(k.dev / 1e9).toFixed(3)} | ${(k.tg / 1e9).toFixed(3)} | ${(k.laneOps / 1e9).toFixed(1)} | ${fmt(k.s)} | ${bound} |`);
    }
    lines.push('');
  }
  lines.push('GPU figures (src/metal/cost-model.ts):');
  lines.push('');
  for (const g of GPUS) lines.push(`- ${g.name}: ${Object.entries(g.sources).map(([k, v]) => `${k}: ${v}`).join('; ')}`);
  lines.push(`- threadgroup bandwidth: ${TG_BYTES_PER_CYCLE.source}; ALUs: ${ALUS_PER_CORE.source}`);
  // read by scripts/test-metal.mjs, which prints the estimate for the Mac it runs on beside the measurement
  const estimates = Object.fromEntries(TOWERS.map((t) => [t.label, Object.fromEntries(GPUS.map((g) => [g.name, Number(results[t.label].est[g.name].s.toFixed(4))]))]));
  lines.push('', `<!-- metal-model-estimates: ${JSON.stringify(estimates)} -->`);
  for (const t of TOWERS)
    process.stderr.write(`metal-model: ${t.label}: ${GPUS.map((g) => `${g.name} ${fmt(results[t.label].est[g.name].s)} s / f16 ${fmt(half[t.label].est[g.name].s)} s`).join(', ')} (model)\n`);
  const q = 'qwen3_5 1024x1024', head = results[q].est['M4 Max'].s, headH = half[q].est['M4 Max'].s;
  const devRatio = half[q].totals.dev / results[q].totals.dev;
  process.on('exit', () => console.log(`metal-model: qwen3_5 1024x1024 on M4 Max: ${head.toFixed(3)} s f32, ${headH.toFixed(3)} s f16 (${(headH / head).toFixed(2)}x; device traffic ${devRatio.toFixed(2)}x) (model)`));
  return { title: 'Metal cost model (a model, not a measurement)', body: lines.join('\n'), results };
}

if (process.argv[2] === '--child') await child();
