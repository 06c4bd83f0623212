// Bench piece: tessera and onnxruntime-node side by side on the same Qwen3.5-size block stack
// (hidden 1152, 16 heads of 72, MLP 4304; 4 blocks, see ort/model.mjs) and the same inputs, at
// N = 256, 1,120, 4,096 and 8,192 patches, with numpy/OpenBLAS sgemm as the roofline. Writes the
// section for BENCHMARKS.md and bench-plot.svg next to it (ms vs N for both engines).
//   npm run bench -- ort-peer                       (the whole sweep: ~10 min on a quiet 2-core VM, estimated;
//                                                   plus at most --ort-peer-wait-s of waiting for quiet)
//   node bench/pieces/ort-peer.mjs [flags]         (this piece alone, after `npm run build`; prints the section)
// Flags (also through npm run bench -- ort-peer --ort-peer-...):
//   --ort-peer-ns=256,1120      patch counts (default 256,1120,4096,8192)
//   --ort-peer-runs=5           timed runs per engine and N (median reported)
//   --ort-peer-noisy            no waiting for quiet and no rejection: for trying the machinery on a
//                               loaded machine (the section then says its figures are not valid)
//   --ort-peer-std-max-n=4096   largest N at which ORT's std-attention variant runs
//   --ort-peer-wait-s=900       total time the piece may spend waiting for a quiet machine
//   --ort-peer-ort-1t           also ORT (mha) at 1 thread, so that 1-thread tessera has a 1-thread reference
//   --ort-peer-threads=2        threads of every engine's multi-thread rows (default: all logical cores),
//                               e.g. a 2-thread table on a 16-core host
//   --ort-peer-no-1t            leave out tessera's 1-thread row (the sweep's longest at large N)
//   --ort-peer-simd=avx2        hold tessera to that SIMD level (TESSERA_SIMD for its processes; the
//                               ort-peer-avx2 piece runs this); onnxruntime is held there too (ort/ort-held.mjs)
import { fork, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { DEPTH, blockFlops, blockGemms, gridFor, makeBlockStack } from './ort/model.mjs';
import { REJECT, foreignNow, waitQuiet } from './ort/quiet.mjs';
import { svgPlot } from './ort/plot.mjs';
import { fmaPeak } from './ort/fma-peak.mjs';
import { ortHeldToAvx2 } from './ort/ort-held.mjs';
import { addon } from '../../dist/native.js';

const require = createRequire(import.meta.url);
const here = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = join(here, 'ort', 'engine-child.mjs');
const TOWER_DEPTH = 27;
export const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

function flags(argv = process.argv) {
  const get = (k, d) => { const a = argv.find((s) => s.startsWith(`--ort-peer-${k}=`)); return a ? a.split('=')[1] : d; };
  return {
    ns: get('ns', '256,1120,4096,8192').split(',').map(Number),
    runs: Number(get('runs', 5)),
    noisy: argv.includes('--ort-peer-noisy'),
    stdMaxN: Number(get('std-max-n', 4096)),
    ort1t: argv.includes('--ort-peer-ort-1t'),
    threads: Number(get('threads', 0)) || cpus().length,
    no1t: argv.includes('--ort-peer-no-1t'),
    waitS: Number(get('wait-s', 900)),
    simd: get('simd', null),
  };
}

// What onnxruntime runs: MLAS picks its kernels once, from CPUID and XGETBV, when the library
// loads, and no environment variable or session option lowers that choice. Held to AVX2 (tessera
// at --ort-peer-simd=avx2 on an AVX-512 host), ORT runs from a copy of its library whose AVX-512
// checks fail (ort/ort-held.mjs says how and why); where that copy cannot be made, ORT runs the
// host's widest ISA and the section says so.
export const ORT_HELD_NOTE = 'onnxruntime has no option to lower its ISA (MLAS picks its kernels from CPUID/XGETBV when the library loads), so it runs from a copy of its library in which each test of the AVX-512 register-state bits of XCR0 also tests an always-clear bit (`bench/pieces/ort/ort-held.mjs`): the library then sees what an AVX2-only CPU shows it, and MLAS runs its FMA3 (AVX2) kernels, checked once by disassembling the hot loop (ymm registers only; docs/cpu.md#avx2-16-ymm-registers), and in every run by its rate, which must stay under the AVX2 FMA peak';
export const ORT_UNHELD_NOTE = 'onnxruntime cannot be held to a lower ISA here';

/** A forked engine: send(cmd) resolves with its reply; a child that dies rejects with its stderr. */
export class Engine {
  constructor(name, job) {
    this.name = name;
    this.proc = fork(CHILD, [JSON.stringify(job)], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], execArgv: [], env: { ...process.env, ...job.env } });
    this.stderr = '';
    this.proc.stderr.on('data', (d) => { this.stderr = (this.stderr + d).slice(-4000); });
    this.waiting = null;
    this.proc.on('message', (m) => { const w = this.waiting; this.waiting = null; if (!w) return; m.ok ? w.resolve(m) : w.reject(new Error(`${name}: ${m.error}`)); });
    this.proc.on('exit', (code, sig) => { const w = this.waiting; this.waiting = null; w?.reject(new Error(`${name} exited (${code ?? sig}): ${this.stderr.slice(-1500)}`)); });
    this.proc.on('error', (err) => { const w = this.waiting; this.waiting = null; w?.reject(new Error(`${name}: ${err.message}`)); });
    this.ready = this.#next();
  }
  #next() { return new Promise((resolve, reject) => { this.waiting = { resolve, reject }; }); }
  send(cmd) {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.reject(new Error(`${this.name} had exited: ${this.stderr.slice(-1500)}`));
    const p = this.#next();
    this.proc.send(cmd);
    return p;
  }
  kill() { if (this.proc.exitCode === null) this.proc.kill('SIGKILL'); }
}

/**
 * numpy sgemm on the block's four GEMMs at each N, at 1 and `threads` threads; null without python3+numpy.
 * coretype: OpenBLAS's kernel to hold it to (OPENBLAS_CORETYPE, which dynamic-arch builds such as
 * numpy's honour: 'Haswell' is its AVX2 kernel), else the one it picks for the CPU.
 */
function roofline(ns, threads, runs, noisy, waitS, coretype) {
  const env = { ...process.env };
  delete env.OPENBLAS_CORETYPE; // these pin an older, slower kernel on some machines (this run only)
  delete env.OPENBLAS_L2_SIZE;
  if (coretype) env.OPENBLAS_CORETYPE = coretype;
  if (spawnSync('python3', ['-c', 'import numpy'], { env }).status !== 0) return null;
  const job = { ns, threads: [...new Set([1, threads])], runs, noisy, wait_s: waitS, gemms: Object.fromEntries(ns.map((n) => [n, blockGemms(n)])) };
  const r = spawnSync('python3', [join(here, 'ort', 'roofline.py'), JSON.stringify(job)], { env, encoding: 'utf8', maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`roofline failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').at(-1));
}

/**
 * The time a run may spend waiting for a quiet host (`waitS` seconds; none when `noisy`): `quiet()` waits for one
 * within what is left; once it has run out, the run is degraded (no more waiting or repeats; its rows so marked).
 */
export function waitBudget(noisy, waitS) {
  let leftMs = noisy ? 0 : waitS * 1000;
  let degraded = false;
  return {
    quiet: async () => {
      if (leftMs <= 0) { degraded = degraded || !noisy; return; }
      const t = performance.now();
      await waitQuiet(Math.min(leftMs, 120000));
      leftMs -= performance.now() - t;
    },
    spend: (ms) => { leftMs -= ms; },
    leftMs: () => Math.max(0, leftMs),
    degraded: () => degraded,
  };
}

/**
 * Warms up every live engine once (its row gets warmMs and relDiff, the check against tessera), then
 * times them taking turns: each round runs every engine that still needs runs once, the order rotating,
 * after waiting for quiet (`quiet()`). A run during which other processes used more than REJECT of the
 * cores is rejected and repeated, at most 4x `runs` in all, and not at all once `isDegraded()` (the wait
 * budget ran out). Each row's `kept` / `rejected` get { ms, foreign, blockMs } (blockMs: the engine's
 * per-block times where it has them); an engine that fails is passed to `fail(engine, error)`.
 */
export async function timeEngines(engines, { runs, noisy, quiet, isDegraded, fail }) {
  const live = () => engines.filter((e) => !e.failed);
  for (const e of live()) {
    await quiet();
    try {
      const w = await e.send('warm');
      Object.assign(e.row, { warmMs: w.ms, relDiff: w.relDiff });
    } catch (err) { fail(e, err); }
  }
  const wants = (r) => { const n = r.kept.length + r.rejected.length; return r.kept.length < runs && n < 4 * runs && !(isDegraded() && n >= runs); };
  for (let round = 0; live().some((e) => wants(e.row)); round++) {
    const order = engines.map((_, i) => engines[(i + round) % engines.length]);
    for (const e of order) {
      if (e.failed || !wants(e.row)) continue;
      await quiet();
      try {
        const m = await e.send('run');
        (noisy || m.foreign <= REJECT ? e.row.kept : e.row.rejected).push({ ms: m.ms, foreign: m.foreign, ...(m.blockMs ? { blockMs: m.blockMs } : {}) });
        e.row.walls.push(m.wall);
      } catch (err) { fail(e, err); }
    }
  }
}

/** Runs the sweep; returns the raw figures. */
export async function measureOrtPeer(opts = flags()) {
  const { ns, runs, noisy, stdMaxN } = opts;
  for (const dep of ['onnxruntime-node', 'onnx-proto']) {
    try { require.resolve(dep); } catch { throw new Error(`ort-peer: ${dep} (a devDependency) is not installed: run npm install`); }
  }
  const T = opts.threads;
  const t0 = performance.now();
  // ISAs: ORT's is the host's widest (fma-peak's default pick); tessera's is --ort-peer-simd or the same.
  const runPeak = fmaPeak(); // the ceiling no engine can pass, per ISA, at 1 and T threads
  const hostIsa = runPeak ? runPeak(1).isa : 'unknown';
  const simd = opts.simd ?? process.env.TESSERA_SIMD ?? hostIsa;
  const tesseraEnv = opts.simd ? { TESSERA_SIMD: opts.simd } : {};
  // ORT at tessera's ISA where that is lower than the host's (AVX2 on an AVX-512 host).
  const held = simd === 'avx2' && hostIsa === 'avx512' ? ortHeldToAvx2(join(root, 'bench', 'out')) : null;
  const ortIsa = held?.dir ? 'avx2' : hostIsa;
  const ortJob = held?.dir ? { ortDir: held.dir } : {};
  const files = makeBlockStack();
  const genS = (performance.now() - t0) / 1000;
  const budget = waitBudget(noisy, opts.waitS);
  const quiet = budget.quiet;
  const loadAtStart = await foreignNow();
  await quiet();
  const roof = roofline(ns, T, runs, noisy, budget.leftMs() / 1000, simd === 'avx2' && hostIsa === 'avx512' ? 'Haswell' : undefined);
  if (roof) budget.spend(roof.waited_s * 1000);
  await quiet();
  const peak = {}; // peak[isa][threads] = { threads, isa, gflops }
  // precision 'bf16' rows run on the bf16 GEMM this CPU has (none: f32, and the row says so), held to
  // that unit's peak (fma-peak.cc's avx512-bf16, amx, neon-bf16 loops)
  const bf16Isa = opts.simd ? null : addon().bf16Level === 'none' ? null : addon().bf16Level;
  if (runPeak) for (const isa of new Set([simd, hostIsa, ...(bf16Isa ? [bf16Isa] : [])])) peak[isa] = Object.fromEntries([...new Set([1, T])].map((t) => [t, runPeak(t, isa)]));
  const rows = [], failures = [];
  for (const N of ns) {
    const grid = gridFor(N);
    const dir = mkdtempSync(join(tmpdir(), 'tessera-ort-peer-'));
    const engines = [];
    // An engine that fails (a crash, memory) drops out with its error; the others go on.
    const fail = (e, err) => { e.failed = true; e.kill(); failures.push({ N, engine: `${e.row.engine}, ${e.row.threads} thread(s)`, error: String(err.message ?? err).split('\n')[0].slice(0, 300) }); };
    const live = () => engines.filter((e) => !e.failed);
    try {
      try {
        const prep = new Engine('prep', { role: 'prep', tower: files.tower, grid, threads: T, dir, env: tesseraEnv });
        await prep.ready;
      } catch (err) {
        failures.push({ N, engine: 'tessera (input preparation)', error: String(err.message ?? err).split('\n')[0].slice(0, 300) });
        continue;
      }
      const specs = [
        ['tessera', T, { role: 'tessera', tower: files.tower, threads: T, env: tesseraEnv }],
        ...(T > 1 && !opts.no1t ? [['tessera', 1, { role: 'tessera', tower: files.tower, threads: 1, env: tesseraEnv }]] : []),
        ['tessera-bf16', T, { role: 'tessera', tower: files.tower, threads: T, precision: 'bf16', env: tesseraEnv }],
        ['ort-mha', T, { role: 'ort', file: files.onnx.mha, threads: T, ...ortJob }],
        ...(opts.ort1t && T > 1 ? [['ort-mha', 1, { role: 'ort', file: files.onnx.mha, threads: 1, ...ortJob }]] : []),
        ...(N <= stdMaxN ? [['ort-std', T, { role: 'ort', file: files.onnx.std, threads: T, ...ortJob }]] : []),
      ];
      for (const [engine, threads, job] of specs) {
        const e = new Engine(`${engine}/${threads}t N=${N}`, { ...job, grid, dir });
        engines.push(e);
        const isa = engine === 'tessera' ? simd : engine === 'tessera-bf16' ? bf16Isa ?? `${simd} (f32: no bf16 units)` : ortIsa;
        e.row = { N, grid, engine, threads, isa, kept: [], rejected: [], walls: [] };
        try { e.row.loadMs = (await e.ready).loadMs; } catch (err) { fail(e, err); }
      }
      await timeEngines(engines, { runs, noisy, quiet, isDegraded: budget.degraded, fail });
      for (const e of live()) {
        const r = e.row;
        try { r.maxRssMiB = (await e.send('done')).maxRssMiB; } catch (err) { fail(e, err); continue; }
        r.unquiet = r.kept.length < runs;
        const times = (r.unquiet ? [...r.kept, ...r.rejected] : r.kept).map((k) => k.ms);
        r.ms = median(times);
        r.msPerBlock = r.ms / DEPTH;
        r.msTower = r.msPerBlock * TOWER_DEPTH;
        r.gflops = (blockFlops(N) * DEPTH) / (r.ms / 1000) / 1e9;
        // A held ORT faster than the AVX2 FMA peak would be running AVX-512 after all (the 1-thread
        // peak times the threads: a peak measured on a busy machine reads low at more threads).
        const cap = peak[r.isa]?.[1]?.gflops * r.threads;
        if (held?.dir && r.engine.startsWith('ort') && cap && r.gflops > cap) {
          fail(e, new Error(`ran ${r.gflops.toFixed(0)} GFLOP/s, above ${r.threads} x the 1-thread avx2 FMA peak (${cap.toFixed(0)}): the patch in ort/ort-held.mjs did not hold it to avx2`));
          continue;
        }
        rows.push(r);
        process.stderr.write(`ort-peer: N=${N} ${r.engine} ${r.threads}t: ${r.ms.toFixed(0)} ms / ${DEPTH} blocks, ${r.gflops.toFixed(0)} GFLOP/s, ${r.maxRssMiB.toFixed(0)} MiB${r.relDiff ? `, vs tessera ${r.relDiff.toExponential(1)}` : ''}\n`);
      }
    } finally {
      for (const e of engines) e.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return {
    rows, failures, roof, peak, T, runs, noisy, degraded: budget.degraded(), stdMaxN, genS, loadAtStart, ns, waitS: opts.waitS, simd, hostIsa, ortIsa, heldWhy: held && !held.dir ? held.why : null,
    cpu: `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} logical cores${T !== cpus().length ? `, every engine on ${T} threads` : ''}`,
    minutes: (performance.now() - t0) / 60000,
    ortVersion: require('onnxruntime-node/package.json').version,
  };
}

export const f0 = (v) => Math.round(v).toLocaleString('en-US');
export const f1 = (v) => v.toFixed(1);

export function report(res, plotFile = 'bench-plot.svg') {
  const { rows, roof, T } = res;
  const peakAt = (t, isa = res.simd) => res.peak?.[isa]?.[t]?.gflops;
  const roofAt = (n, t) => roof?.rows.find((r) => r.n === n && r.threads === t)?.gflops;
  // The reference for a row: the faster ORT variant at the row's thread count, else at T threads.
  const ortAt = (n, t) => rows.filter((r) => r.N === n && r.threads === t && r.engine.startsWith('ort')).reduce((a, b) => (!a || b.ms < a.ms ? b : a), null);
  const ortBest = (n, t = T) => ortAt(n, t) ?? ortAt(n, T);
  const threadsOf = (r) => `${r.threads} thread${r.threads > 1 ? 's' : ''}`;
  const label = (r) => (r.engine === 'tessera' ? `tessera, ${threadsOf(r)}` : r.engine === 'tessera-bf16' ? `tessera bf16, ${threadsOf(r)}` : `ORT ${r.engine.slice(4)}, ${threadsOf(r)}`);
  const table = ['| N (grid) | engine | ISA | ms / 4 blocks | ms / image (27 blocks, ×27) | GFLOP/s | speed ÷ ORT | % of roofline | % of FMA peak (own ISA) | peak RSS MiB | runs kept (rejected) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |'];
  for (const r of rows) {
    const best = ortBest(r.N, r.threads), roofG = roofAt(r.N, r.threads);
    const isBest = r.threads === T && r === ortAt(r.N, T) && rows.some((o) => o.N === r.N && o.threads === T && o.engine.startsWith('ort') && o !== r) ? ' (faster ORT)' : '';
    const pk = peakAt(r.threads, r.isa);
    table.push(`| ${f0(r.N)} (${r.grid.h}×${r.grid.w}) | ${label(r)}${isBest} | ${r.isa} | ${f0(r.ms)} | ${f0(r.msTower)} | ${f1(r.gflops)} | ${best ? `${(best.ms / r.ms).toFixed(2)}×` : '–'} | ${roofG ? `${f0((100 * r.gflops) / roofG)} %` : '–'} | ${pk ? `${f0((100 * r.gflops) / pk)} %` : '–'} | ${f0(r.maxRssMiB)} | ${r.kept.length} (${r.rejected.length})${r.unquiet ? ' †' : ''} |`);
  }
  const checks = ['| N | roofline GFLOP/s, 1 thread | roofline GFLOP/s, ' + T + ' threads | max\\|ORT mha − tessera\\| / max\\|tessera\\| | same, ORT std |', '| --- | --- | --- | --- | --- |'];
  for (const n of res.ns) {
    const d = (e) => rows.find((r) => r.N === n && r.engine === e)?.relDiff;
    const r1 = roofAt(n, 1), rT = roofAt(n, T);
    const dag = (t) => (roof?.rows.find((r) => r.n === n && r.threads === t)?.unquiet ? ' †' : '');
    checks.push(`| ${f0(n)} | ${r1 ? f1(r1) + dag(1) : '–'} | ${rT ? f1(rT) + dag(T) : '–'} | ${d('ort-mha')?.toExponential(1) ?? '–'} | ${d('ort-std')?.toExponential(1) ?? 'not run'} |`);
  }
  // The plot: ms per image (27 blocks) vs N, both engines, and the time at the roofline rate.
  const series = [
    { label: `tessera, ${T} threads`, color: '#d62728', points: rows.filter((r) => r.engine === 'tessera' && r.threads === T).map((r) => [r.N, r.msTower]) },
    { label: 'tessera, 1 thread', color: '#ff9896', dash: '6 3', points: T > 1 ? rows.filter((r) => r.engine === 'tessera' && r.threads === 1).map((r) => [r.N, r.msTower]) : [] },
    { label: `ORT mha, ${T} threads`, color: '#1f77b4', points: rows.filter((r) => r.engine === 'ort-mha' && r.threads === T).map((r) => [r.N, r.msTower]) },
    { label: 'ORT mha, 1 thread', color: '#aec7e8', dash: '6 3', points: T > 1 ? rows.filter((r) => r.engine === 'ort-mha' && r.threads === 1).map((r) => [r.N, r.msTower]) : [] },
    { label: `ORT std, ${T} threads`, color: '#17becf', dash: '6 3', points: rows.filter((r) => r.engine === 'ort-std').map((r) => [r.N, r.msTower]) },
    { label: `sgemm roofline, ${T} threads`, color: '#7f7f7f', dash: '2 3', points: res.ns.filter((n) => roofAt(n, T)).map((n) => [n, (blockFlops(n) * TOWER_DEPTH) / (roofAt(n, T) * 1e9) * 1000]) },
  ].filter((s) => s.points.length);
  const svg = svgPlot({ title: 'Qwen3.5-size vision tower, 27 blocks (×27 from 4): ms per image', xLabel: 'patches N (one image)', yLabel: 'ms per image (log)', series, xTicks: res.ns });
  const loaded = res.noisy
    ? '\n**Not valid figures**: this run was made with `--ort-peer-noisy` (no waiting for a quiet machine, no rejection of loaded runs).\n'
    : res.degraded || rows.some((r) => r.unquiet) || res.roof?.rows.some((r) => r.unquiet)
      ? '\n**†** fewer than the wanted quiet runs: the machine stayed busy past the wait budget; that figure includes loaded runs and is not valid.\n'
      : '';
  const body = [
    `Host: ${res.cpu}; its widest ISA ${res.hostIsa}. tessera runs ${res.simd}${res.simd !== res.hostIsa ? ` (held there by \`TESSERA_SIMD=${res.simd}\`)` : ''}; onnxruntime runs ${res.ortIsa}${res.ortIsa !== res.hostIsa ? `: ${ORT_HELD_NOTE}` : res.simd !== res.hostIsa ? `: ${ORT_UNHELD_NOTE} (${res.heldWhy}). So the speed ratios of this section compare tessera's ${res.simd} kernels with ORT's ${res.hostIsa} kernels, and the ISA-fair figure is each engine's % of its own ISA's FMA peak` : ''}. Each row names its ISA.`,
    '',
    `Both engines run the same 4 blocks of a Qwen3.5-size vision tower (hidden 1152, 16 heads of 72, MLP 4304, LayerNorm eps 1e-6, tanh-GELU, 2D rope; random weights, \`bench/pieces/ort/model.mjs\`) on the same input, one image of N patches, in one run, alternating.`,
    '',
    '- **Weights**: tessera reads them as bf16 from an HF folder and, at open, rearranges them in place into its GEMM\'s panel layout (still bf16; the micro-kernel widens them to f32 in registers: its normal \`resident\` path); onnxruntime gets the very same values as f32 in an ONNX model (its CPU MatMul takes no bf16 weights). Both compute in f32.',
    '- **Same function**: the ONNX graph includes the 2D rope, as tessera\'s blocks do (an earlier ORT-only measurement of this stack left it out). ORT\'s input is tessera\'s embed-stage output for the image, and ORT gets the rope tables (cos/sin, docs/models/qwen-vision.md#rope, computed in JS; tessera computes its own before the embed stage). Each run compares the two engines\' outputs after the 4 blocks (second table).',
    `- **onnxruntime-node ${res.ortVersion}**, CPU EP, intraOpNumThreads ${T}, graphOptimizationLevel \`all\`, in two attention variants: \`mha\` (com.microsoft RotaryEmbedding + MultiHeadAttention, ORT's fused kernels) and \`std\` (plain Reshape/Transpose/MatMul/Softmax; [16, N, N] scores materialised; rope from elementwise ops). The faster one at each N is the reference for the speed ratio. \`std\` does not run above N = ${f0(res.stdMaxN)}: at 8,192 its score buffers alone take 4 GiB, and ORT's arena keeps two of them.`,
    `- **Time**: tessera = the sum of its 4 block stages' wall times (\`onProgress\` \`ms\`; leaves out the patch embedding, the merger and the rope tables; includes its default finite-value check of each block output); ORT = \`session.run\` (the 4 blocks and its input/output copies). ms / image = ms per block × 27 (the real tower's depth; embedding and merger not included). Warm-up, then the median of ${res.runs} timed runs per engine; the engines of one N are loaded together and take turns, the order rotating each round.`,
    `- **GFLOP/s** counted per block (one image) as 2N(1152·3456 + 1152·1152 + 2·1152·4304) + 4N²·1152. **Speed ÷ ORT** = the faster ORT variant's ms ÷ this row's ms (above 1: faster than ORT), ORT at the row's thread count where it ran (\`--ort-peer-ort-1t\` adds ORT mha at 1 thread), else at ${T} threads.`,
    roof
      ? `- **Roofline**: numpy ${roof.numpy} sgemm (OpenBLAS kernel \`${roof.corename}\`, ${res.simd === 'avx2' && res.hostIsa === 'avx512' ? 'held to its AVX2 kernel by OPENBLAS_CORETYPE=Haswell, OPENBLAS_L2_SIZE unset' : 'OPENBLAS_CORETYPE/L2_SIZE unset'} for that process) on the block's four weight GEMMs with M = N, at 1 and ${T} threads, measured in the same run; % of roofline = the row's GFLOP/s ÷ the roofline at its thread count and N.`
      : '- **Roofline**: not measured (python3 with numpy not found).',
    peakAt(T)
      ? `- **FMA peak**: ${Object.keys(res.peak).map((isa) => `${isa} ${f1(peakAt(1, isa))} GFLOP/s at 1 thread, ${f1(peakAt(T, isa))} at ${T}`).join('; ')} (FMAs on registers only, \`bench/pieces/ort/fma-peak.cc\` with that ISA, measured in the same run): the ceiling for any engine on that ISA; each row's % is of its own ISA's peak. A speed ratio of tessera over ORT is bounded by tessera's peak ÷ ORT's GFLOP/s (e.g. at ${T} threads and N = ${f0(res.ns[1] ?? res.ns[0])}: ${(() => { const o = ortBest(res.ns[1] ?? res.ns[0]); return o ? `${(peakAt(T) / o.gflops).toFixed(2)}×` : '–'; })()}), and only if every op of a block ran at peak.`
      : '- **FMA peak**: not measured (no C++ compiler named `c++`).',
    `- **Peak RSS**: maxRSS of the engine's own process (a fresh one per engine and N; Node's own ~50 MiB included). tessera holds ${f0((DEPTH * 15.2e6 * 2) / 2 ** 20)} MiB of bf16 block weights (plus ~80 MiB for the patch embedding and the merger, which ORT's model does not have); ORT's model holds ${f0((DEPTH * 15.2e6 * 4) / 2 ** 20)} MiB of f32, which ORT prepacks.`,
    `- **Shared machine**: before each timed run the bench waits for other processes to be quiet (< 5 % of the cores, bounded), and a run during which they used more than ${REJECT * 100} % is rejected and repeated (at most 4× the runs; the waiting is capped at ${f0(res.waitS / 60)} min for the whole piece, after which runs are neither repeated nor waited for, and so marked). Foreign load when the piece started: ${f0(100 * res.loadAtStart)} %.`,
    loaded,
    ...table,
    ...(res.failures?.length ? ['', ...res.failures.map((f) => `- **Failed** at N = ${f0(f.N)}: ${f.engine}: ${f.error}`)] : []),
    '',
    ...checks,
    '',
    `![ms per image vs N: tessera and onnxruntime](${plotFile})`,
    '',
    `This piece took ${res.minutes.toFixed(1)} min (model files made in ${res.genS.toFixed(0)} s; they are reused from bench/out/ afterwards).`,
  ];
  return { body: body.join('\n'), svg };
}

/** The section for BENCHMARKS.md; simd (e.g. 'avx2') holds tessera to that level (the ort-peer-avx2 piece). */
export async function section(simd = flags().simd) {
  const res = await measureOrtPeer({ ...flags(), simd });
  const tag = simd ? `-${simd}` : '';
  writeFileSync(join(root, 'bench', 'out', `ort-peer${tag}-results.json`), JSON.stringify(res, null, 1));
  const plot = `bench-plot${tag}.svg`;
  const { body, svg } = report(res, plot);
  writeFileSync(join(root, plot), svg);
  return { title: `Side by side: tessera${simd ? ` held to ${simd}` : ''} vs onnxruntime-node, Qwen3.5-size block stack (CPU, f32 arithmetic)`, body };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const s = await section();
  console.log(`## ${s.title}\n\n${s.body}`);
}
