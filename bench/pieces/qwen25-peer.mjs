// Bench piece: tessera (f32 and bf16) and onnxruntime-node side by side on Qwen2.5-VL-7B-shaped blocks
// (hidden 1280, 16 heads of 80, gated SiLU MLP 3420 with biases, RMSNorm; a window-attention block and a
// full-attention block, ort/model-qwen25.mjs) on the same inputs, at N = 1,024 and 4,096 patches, in one
// run, alternating, medians. The real tower has 28 window blocks and 4 full-attention ones (7/15/23/31),
// whose attention costs differ by N / 64, so both kinds are timed and the tower's blocks are
// 28 x window + 4 x full. Same machinery as ort-peer.mjs (engines in child processes, waiting for a
// quiet machine, the FMA peak of each row's ISA).
//   npm run bench -- qwen25-peer
//   node bench/pieces/qwen25-peer.mjs [flags]     (this piece alone, after `npm run build`; prints the section)
// Flags (also through npm run bench -- qwen25-peer --qwen25-peer-...):
//   --qwen25-peer-ns=1024,4096   patch counts (square grids of whole 8x8-patch windows; default 1024,4096)
//   --qwen25-peer-runs=5         timed runs per engine and N (median reported)
//   --qwen25-peer-noisy          no waiting for quiet and no rejection (the section says its figures are not valid)
//   --qwen25-peer-std-max-n=4096 largest N at which ORT's std-attention variant runs
//   --qwen25-peer-wait-s=600     total time the piece may spend waiting for a quiet machine
//   --qwen25-peer-threads=2      threads of every engine (default: all logical cores)
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { Engine, f0, f1, median, timeEngines, waitBudget } from './ort-peer.mjs';
import { Q25, Q25_TOWER, STACK, blockFlops25, makeQwen25Stack } from './ort/model-qwen25.mjs';
import { REJECT, foreignNow } from './ort/quiet.mjs';
import { fmaPeak } from './ort/fma-peak.mjs';
import { addon } from '../../dist/native.js';

const require = createRequire(import.meta.url);
const cpuinfo = () => { try { return readFileSync('/proc/cpuinfo', 'utf8'); } catch { return `model name : ${cpus()[0]?.model ?? 'unknown CPU'}`; } };
const root = fileURLToPath(new URL('../..', import.meta.url));

/** The real tower's blocks by kind: 28 window blocks and 4 full-attention ones. */
export const TOWER_BLOCKS = { window: Q25_TOWER.depth - Q25_TOWER.full.length, full: Q25_TOWER.full.length };
/** The goals this piece reports on: f32 at least ORT's speed; bf16 at least 1.8x f32 on a CPU with bf16 units. */
export const GOALS = { f32OverOrt: 1.0, bf16OverF32: 1.8 };

function flags(argv = process.argv) {
  const get = (k, d) => { const a = argv.find((s) => s.startsWith(`--qwen25-peer-${k}=`)); return a ? a.split('=')[1] : d; };
  return {
    ns: get('ns', '1024,4096').split(',').map(Number),
    runs: Number(get('runs', 5)),
    noisy: argv.includes('--qwen25-peer-noisy'),
    stdMaxN: Number(get('std-max-n', 4096)),
    threads: Number(get('threads', 0)) || cpus().length,
    waitS: Number(get('wait-s', 600)),
  };
}

/** A square grid of N patches (whole windows: a side a multiple of the window's 8 patches). */
export function squareGrid(N) {
  const s = Math.round(Math.sqrt(N));
  if (s * s !== N || s % Q25.windowPatches) throw new Error(`qwen25-peer: ${N} patches is not a square grid of whole ${Q25.windowPatches}x${Q25.windowPatches}-patch windows`);
  return { t: 1, h: s, w: s };
}

/** FLOPs of the tower's 32 blocks at N patches (one image): 28 window blocks and 4 whole-image ones. */
export const towerBlockFlops = (N) => TOWER_BLOCKS.window * blockFlops25(N, Q25.windowPatches ** 2) + TOWER_BLOCKS.full * blockFlops25(N, N);

/**
 * A row's figures from its kept runs' per-block times ([window ms, full ms] per run; the stack's block
 * order): medians per kind, the tower's blocks (28 x window + 4 x full) and their rate.
 */
export function rowFigures(N, runs) {
  const win = median(runs.map((r) => r.blockMs[0])), full = median(runs.map((r) => r.blockMs[1]));
  const tower = TOWER_BLOCKS.window * win + TOWER_BLOCKS.full * full;
  return {
    winMs: win, fullMs: full, towerMs: tower,
    winGflops: blockFlops25(N, Q25.windowPatches ** 2) / (win / 1000) / 1e9,
    fullGflops: blockFlops25(N, N) / (full / 1000) / 1e9,
    gflops: towerBlockFlops(N) / (tower / 1000) / 1e9,
  };
}

/**
 * The host as the docs name it: its CPU's model name, the core class where the CPU family tells it (AMD's
 * families 0x17, 0x19, 0x1A), its cores and vector units, e.g. "AMD EPYC (Zen 5 class), 2 cores, AVX-512/AVX512-BF16".
 */
export function hostName(cpuinfo, cores, isas) {
  const field = (k) => cpuinfo.match(new RegExp(`^${k}\\s*: (.*)$`, 'm'))?.[1]?.trim();
  const cls = field('vendor_id') === 'AuthenticAMD' ? { 23: 'Zen 1/2 class', 25: 'Zen 3/4 class', 26: 'Zen 5 class' }[Number(field('cpu family'))] : undefined;
  const names = { avx512: 'AVX-512', avx2: 'AVX2', 'avx512-bf16': 'AVX512-BF16', amx: 'AMX-BF16', neon: 'NEON', 'neon-bf16': 'NEON BF16' };
  const units = isas.filter(Boolean).map((i) => names[i] ?? i);
  return `${field('model name') ?? 'unknown CPU'}${cls ? ` (${cls})` : ''}, ${cores} cores${units.length ? `, ${units.join('/')}` : ''}`;
}

/** Runs the engines; returns the raw figures. */
export async function measureQwen25Peer(opts = flags()) {
  const { ns, runs, noisy, stdMaxN } = opts;
  for (const dep of ['onnxruntime-node', 'onnx-proto']) {
    try { require.resolve(dep); } catch { throw new Error(`qwen25-peer: ${dep} (a bench dependency) is not installed: run npm install --prefix bench`); }
  }
  const T = opts.threads;
  const t0 = performance.now();
  const runPeak = fmaPeak();
  const hostIsa = runPeak ? runPeak(1).isa : 'unknown';
  const bf16Isa = addon().bf16Level === 'none' ? null : addon().bf16Level;
  const files = makeQwen25Stack();
  const genS = (performance.now() - t0) / 1000;
  const budget = waitBudget(noisy, opts.waitS);
  const quiet = budget.quiet;
  const loadAtStart = await foreignNow();
  await quiet();
  const peak = {}; // peak[isa] = { threads, isa, gflops } at T threads
  if (runPeak) for (const isa of new Set([hostIsa, ...(bf16Isa ? [bf16Isa] : [])])) peak[isa] = runPeak(T, isa);
  const rows = [], failures = [];
  const common = { family: 'qwen25', depth: STACK.depth, threads: T };
  for (const N of ns) {
    const grid = squareGrid(N);
    const dir = mkdtempSync(join(tmpdir(), 'tessera-qwen25-peer-'));
    const engines = [];
    const fail = (e, err) => { e.failed = true; e.kill(); failures.push({ N, engine: e.row.engine, error: String(err.message ?? err).split('\n')[0].slice(0, 300) }); };
    try {
      try {
        await new Engine('prep', { ...common, role: 'prep', tower: files.tower, grid, dir }).ready;
      } catch (err) {
        failures.push({ N, engine: 'tessera (input preparation)', error: String(err.message ?? err).split('\n')[0].slice(0, 300) });
        continue;
      }
      const specs = [
        ['tessera', hostIsa, { role: 'tessera', tower: files.tower }],
        ['tessera-bf16', bf16Isa ?? `${hostIsa} (f32: no bf16 units)`, { role: 'tessera', tower: files.tower, precision: 'bf16' }],
        ['ort-mha', hostIsa, { role: 'ort', files: [files.onnx.window.mha, files.onnx.full.mha] }],
        ...(N <= stdMaxN ? [['ort-std', hostIsa, { role: 'ort', files: [files.onnx.window.std, files.onnx.full.std] }]] : []),
      ];
      for (const [engine, isa, job] of specs) {
        const e = new Engine(`${engine} N=${N}`, { ...common, ...job, grid, dir });
        engines.push(e);
        e.row = { N, grid, engine, threads: T, isa, kept: [], rejected: [], walls: [] };
        try { e.row.loadMs = (await e.ready).loadMs; } catch (err) { fail(e, err); }
      }
      await timeEngines(engines, { runs, noisy, quiet, isDegraded: budget.degraded, fail });
      for (const e of engines.filter((x) => !x.failed)) {
        const r = e.row;
        try { r.maxRssMiB = (await e.send('done')).maxRssMiB; } catch (err) { fail(e, err); continue; }
        r.unquiet = r.kept.length < runs;
        Object.assign(r, rowFigures(N, r.unquiet ? [...r.kept, ...r.rejected] : r.kept));
        rows.push(r);
        process.stderr.write(`qwen25-peer: N=${N} ${r.engine}: window ${r.winMs.toFixed(0)} ms, full ${r.fullMs.toFixed(0)} ms, tower blocks ${r.towerMs.toFixed(0)} ms, ${r.gflops.toFixed(0)} GFLOP/s${r.relDiff ? `, vs tessera ${r.relDiff.toExponential(1)}` : ''}\n`);
      }
    } finally {
      for (const e of engines) e.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return {
    rows, failures, peak, T, runs, noisy, degraded: budget.degraded(), stdMaxN, genS, loadAtStart, ns, waitS: opts.waitS, hostIsa, bf16Isa,
    cpu: `${hostName(cpuinfo(), cpus().length, [hostIsa, bf16Isa])}${T !== cpus().length ? `, every engine on ${T} threads` : ''}`,
    minutes: (performance.now() - t0) / 60000,
    ortVersion: require('onnxruntime-node/package.json').version,
  };
}

/**
 * The faster ORT variant's time at N for a block kind ('winMs', 'fullMs'), or for the 32 blocks
 * ('towerMs'): 28 x the faster window block + 4 x the faster full block (each kind's best variant, the
 * most generous reference).
 */
export function ortBest(rows, N, key) {
  const best = (k) => { const t = rows.filter((r) => r.N === N && r.engine.startsWith('ort')).map((r) => r[k]); return t.length ? Math.min(...t) : null; };
  if (key !== 'towerMs') return best(key);
  const w = best('winMs'), f = best('fullMs');
  return w === null || f === null ? null : TOWER_BLOCKS.window * w + TOWER_BLOCKS.full * f;
}

/** The goals at each N: tessera f32 ÷ the faster ORT (tower blocks), tessera bf16 ÷ tessera f32. */
export function goals(res) {
  return res.ns.map((N) => {
    const at = (e) => res.rows.find((r) => r.N === N && r.engine === e);
    const f32 = at('tessera'), bf16 = at('tessera-bf16'), ort = ortBest(res.rows, N, 'towerMs');
    return {
      N,
      f32OverOrt: f32 && ort ? ort / f32.towerMs : null,
      bf16OverF32: f32 && bf16 && res.bf16Isa ? f32.towerMs / bf16.towerMs : null,
    };
  });
}

export function report(res) {
  const { rows, T } = res;
  const label = (r) => ({ tessera: 'tessera f32', 'tessera-bf16': 'tessera bf16', 'ort-mha': 'ORT mha', 'ort-std': 'ORT std' })[r.engine] ?? r.engine;
  const ratio = (ref, ms) => (ref ? `${(ref / ms).toFixed(2)}×` : '–');
  const pct = (r) => { const pk = res.peak?.[r.isa.split(' ')[0]]?.gflops; return pk ? `${f0((100 * r.gflops) / pk)} %` : '–'; };
  const table = [
    `| N (grid) | engine | ISA | ms / window block | ms / full block | ms / image, 32 blocks (${TOWER_BLOCKS.window} window + ${TOWER_BLOCKS.full} full) | GFLOP/s (32 blocks) | speed ÷ ORT: window / full / 32 blocks | % of FMA peak (own ISA) | peak RSS MiB | runs kept (rejected) |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of rows) {
    const [w, f, t] = ['winMs', 'fullMs', 'towerMs'].map((k) => ortBest(rows, r.N, k));
    table.push(`| ${f0(r.N)} (${r.grid.h}×${r.grid.w}) | ${label(r)} | ${r.isa} | ${f1(r.winMs)} | ${f1(r.fullMs)} | ${f0(r.towerMs)} | ${f1(r.gflops)} | ${ratio(w, r.winMs)} / ${ratio(f, r.fullMs)} / ${ratio(t, r.towerMs)} | ${pct(r)} | ${f0(r.maxRssMiB)} | ${r.kept.length} (${r.rejected.length})${r.unquiet ? ' †' : ''} |`);
  }
  const met = (v, bar) => (v === null ? 'not measured' : `${v.toFixed(2)}× (${v >= bar ? 'met' : '**missed**'})`);
  const goalLines = goals(res).map((g) => `| ${f0(g.N)} | ${met(g.f32OverOrt, GOALS.f32OverOrt)} | ${res.bf16Isa ? met(g.bf16OverF32, GOALS.bf16OverF32) : 'no bf16 units: not applicable'} |`);
  const checks = ['| N | max\\|ORT mha − tessera\\| / max\\|tessera\\| | same, ORT std |', '| --- | --- | --- |'];
  for (const n of res.ns) {
    const d = (e) => rows.find((r) => r.N === n && r.engine === e)?.relDiff;
    checks.push(`| ${f0(n)} | ${d('ort-mha')?.toExponential(1) ?? '–'} | ${d('ort-std')?.toExponential(1) ?? 'not run'} |`);
  }
  const loaded = res.noisy
    ? '\n**Not valid figures**: this run was made with `--qwen25-peer-noisy` (no waiting for a quiet machine, no rejection of loaded runs).\n'
    : res.degraded || rows.some((r) => r.unquiet)
      ? '\n**†** fewer than the wanted quiet runs: the machine stayed busy past the wait budget; that figure includes loaded runs.\n'
      : '';
  const body = [
    `Host: ${res.cpu}; ISA ${res.hostIsa}${res.bf16Isa ? `, bf16 unit ${res.bf16Isa}` : ', no bf16 units'}. Both engines run the same two blocks of a synthetic Qwen2.5-VL-7B-shaped tower (hidden 1280, 16 heads of 80, gated SiLU MLP 3420 with biases, RMSNorm eps 1e-6, 2D rope; random weights, \`bench/pieces/ort/model-qwen25.mjs\`): a **window** block (attention within windows of 8×8 patches, 64 rows) and a **full** block (attention over the whole image, as blocks 7/15/23/31 of the real tower), on one image of N patches, in one run, alternating.`,
    '',
    '- **Weights**: tessera reads them as bf16 from an HF folder and packs them at open (its `resident` path); onnxruntime gets the same values as f32. `tessera f32` computes in f32; `tessera bf16` is `precision: \'bf16\'`: the linears on the CPU\'s bf16 unit (docs/bf16.md; attention too on AMX only, f32 elsewhere).',
    '- **Window attention in ONNX**: as an export of HF\'s code at a fixed grid has it: the rows (and rope tables) come in window order (HF permutes them once, before the blocks; not timed), and since the grids here are whole windows, the per-window split of HF\'s attention is a Reshape to [windows, 64, heads, 80]: one batched attention. Two variants: `mha` (com.microsoft RotaryEmbedding + MultiHeadAttention with the windows as its batch) and `std` (plain Reshape/Transpose/MatMul/Softmax, [windows, 16, 64, 64] scores for a window block, [16, N, N] for a full one). The faster at each N and block kind is the reference. RMSNorm is ONNX\'s RMSNormalization (opset 23), SiLU a Sigmoid and a Mul.',
    `- **Time**: tessera = each block stage's wall time (\`onProgress\` \`ms\`; includes its finite-value check); ORT = \`session.run\` of each block's model, fed the previous block's output. ms / image = ${TOWER_BLOCKS.window} × window + ${TOWER_BLOCKS.full} × full (the real tower's 32 blocks; patch embedding and merger not included). Warm-up, then the median of ${res.runs} timed runs per engine; the engines of one N are loaded together and take turns, the order rotating each round.`,
    `- **GFLOP/s** over the 32 blocks: a block is 2N(1280·3840 + 1280·1280 + 3·1280·3420) + 4N·S·1280, S = 64 rows per window or N for a full block. **Speed ÷ ORT** = the faster ORT variant's ms ÷ this row's ms (above 1: faster than ORT), per block kind and for the 32 blocks (ORT's best of each kind).`,
    Object.keys(res.peak ?? {}).length
      ? `- **FMA peak** at ${T} threads: ${Object.values(res.peak).map((p) => `${p.isa} ${f1(p.gflops)} GFLOP/s`).join('; ')} (\`bench/pieces/ort/fma-peak.cc\`, measured in the same run); each row's % is of its own ISA's peak (bf16 rows: the bf16 unit's, against which f32 attention counts at the bf16 rate).`
      : '- **FMA peak**: not measured (no C++ compiler named `c++`).',
    `- **Peak RSS**: maxRSS of the engine's own process (tessera: the 2-block tower with its patch embedding and merger; ORT: the two f32 block models, prepacked).`,
    `- **onnxruntime-node ${res.ortVersion}**, CPU EP, intraOpNumThreads ${T}, graphOptimizationLevel \`all\`. Quiet-machine waiting and rejection as in the ort-peer section (runs with more than ${REJECT * 100} % foreign load are repeated). Foreign load when the piece started: ${f0(100 * res.loadAtStart)} %.`,
    loaded,
    ...table,
    ...(res.failures?.length ? ['', ...res.failures.map((f) => `- **Failed** at N = ${f0(f.N)}: ${f.engine}: ${f.error}`)] : []),
    '',
    `Goals (32 blocks): tessera f32 at least ${GOALS.f32OverOrt.toFixed(1)}× the faster ORT; tessera bf16 at least ${GOALS.bf16OverF32}× tessera f32 on a CPU with bf16 units.`,
    '',
    '| N | tessera f32 ÷ ORT | tessera bf16 ÷ tessera f32 |',
    '| --- | --- | --- |',
    ...goalLines,
    '',
    ...checks,
    '',
    `This piece took ${res.minutes.toFixed(1)} min (model files made in ${res.genS.toFixed(0)} s; they are reused from bench/out/ afterwards).`,
  ];
  return body.join('\n');
}

export async function section() {
  const res = await measureQwen25Peer(flags());
  mkdirSync(join(root, 'bench', 'out'), { recursive: true });
  writeFileSync(join(root, 'bench', 'out', 'qwen25-peer-results.json'), JSON.stringify(res, null, 1));
  return { title: 'Side by side: tessera vs onnxruntime-node, Qwen2.5-VL-7B-shaped blocks (CPU, f32 and bf16)', body: report(res) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const s = await section();
  console.log(`## ${s.title}\n\n${s.body}`);
}
