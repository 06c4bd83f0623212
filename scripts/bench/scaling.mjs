// Bench piece: how the CPU backend scales with the cores it is given. scaling/block.cc (the op
// sequence of a Qwen3.5-size block through backend::Backend, weights packed as `resident` packs them)
// is compiled with the system C++ compiler and run at 1, 2, 4, ... threads up to the machine's
// cores, at N = 1,120 and 4,096 patches, next to the machine's FMA peak (ort/fma-peak.cc) at the
// same thread counts. The figures of other machines (where Node is not at hand) are kept in
// scaling/*.json, made by the same two programs (the commands are in scaling/block.cc).
//   npm run bench -- scaling
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonCxxFlags, nativeSources } from '../../gyp/sources.mjs';
import { fmaPeak } from './ort/fma-peak.mjs';
import { waitQuiet } from './ort/quiet.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));
const NS = [1120, 4096];
const BLOCKS = 4, RUNS = 3;

function compile() {
  const out = join(root, 'scripts', 'bench', 'out');
  mkdirSync(out, { recursive: true });
  const srcs = nativeSources({ addon: false }).map((f) => join(root, f));  // the towers' block and what it calls
  const bin = join(out, 'scaling-block');
  const cc = (args) => {
    const r = spawnSync('c++', args, { encoding: 'utf8' });
    if (r.error || r.status !== 0) throw new Error(`scaling: c++ failed: ${r.stderr || r.error}`);
  };
  cc([...addonCxxFlags(), '-pthread', `-I${join(root, 'native')}`, join(here, 'scaling', 'block.cc'), ...srcs, '-o', bin]);
  const peak = fmaPeak();
  if (!peak) throw new Error('scaling: could not build ort/fma-peak.cc');
  return { bin, peak };
}

/** Thread counts 1, 2, 4, ... up to the cores, and the cores themselves. */
export function threadCounts(cores) {
  const t = [];
  for (let n = 1; n < cores; n *= 2) t.push(n);
  t.push(cores);
  return t;
}

/** Each program run waits (at most 2 min) for the machine to be quiet (it may be shared with other work). */
export async function measure() {
  const { bin, peak } = compile();
  const threads = threadCounts(cpus().length);
  const run = async (exe, args) => {
    await waitQuiet(120000);
    return spawnSync(exe, args.map(String), { encoding: 'utf8' }).stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  };
  const rows = [];
  for (const n of NS) for (const t of threads) rows.push(...(await run(bin, [n, BLOCKS, RUNS, t])));
  const peaks = {};
  for (const t of threads) {
    await waitQuiet(120000);
    peaks[t] = peak(t).gflops;
  }
  return { machine: `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} logical cores`, rows, peaks };
}

export function table(res) {
  const out = ['| N | threads | ms / block | GFLOP/s | speed-up over 1 thread | FMA peak GFLOP/s | % of peak |', '| --- | --- | --- | --- | --- | --- | --- |'];
  for (const r of res.rows) {
    const one = res.rows.find((o) => o.n === r.n && o.threads === 1);
    const p = res.peaks[r.threads];
    out.push(`| ${r.n.toLocaleString('en-US')} | ${r.threads} | ${r.ms_per_block.toFixed(1)} | ${r.gflops.toFixed(1)} | ${one ? (one.ms_per_block / r.ms_per_block).toFixed(2) + '×' : '–'} | ${p ? p.toFixed(0) : '–'} | ${p ? Math.round((100 * r.gflops) / p) + ' %' : '–'} |`);
  }
  return out.join('\n');
}

export async function section() {
  const res = await measure();
  const others = readdirSync(join(here, 'scaling')).filter((f) => f.endsWith('.json'));
  const body = [
    `\`scripts/bench/scaling/block.cc\`: the ops of a Qwen3.5-size block (hidden 1152, 16 heads of 72, MLP 4304) through the CPU backend, ${BLOCKS} distinct blocks of random bf16 weights packed at load (as \`resident\` does), one image of N patches, median of ${RUNS} passes after a warm-up; the FMA peak is \`scripts/bench/ort/fma-peak.cc\` at the same thread count. No Node, no JS: the backend alone.`,
    '',
    `**This machine** (${res.machine}):`,
    '',
    table(res),
    ...others.flatMap((f) => {
      const o = JSON.parse(readFileSync(join(here, 'scaling', f), 'utf8'));
      return ['', `**${o.machine}** (measured ${o.when} with the same two programs: ${o.how}):`, '', table(o)];
    }),
  ];
  return { title: 'Thread scaling of the CPU backend (Qwen3.5-size blocks)', body: body.join('\n') };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const s = await section();
  console.log(`## ${s.title}\n\n${s.body}`);
}
