// The full-size half of the bf16 check (docs/bf16.md#accuracy): tessera's side. For each tower folder
// verify/bf16-check/hf_towers.py wrote (DIR/<tower>/model, one <image>.safetensors per image with the
// tower's input and HF fp32's stages, hf-bf16.json), runs tessera on the CPU in f32 and in bf16 at each
// bf16 level (TESSERA_SIMD, read when the addon loads: one child process per run), every stage against
// HF fp32 as max |diff| / max |ref| (the library's maxRelErr), and prints a Markdown table per tower:
// tessera f32, tessera bf16 per level, HF bf16 on the CPU and on CUDA, and whether every tessera bf16
// figure is within HF's own bf16 error (the smaller of HF's two).
//   node verify/bf16-check/compare.mjs DIR [--levels "amx avx512-bf16"] [--json FILE]
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VisionTower } from '../../dist/index.js';
import { addon } from '../../dist/native.js';
import { maxRelErr } from '../../dist/doctor.js';
import { INPUT_TENSORS, e, readTensors, stageOf, stageOrder, towerInput } from './tensors.mjs';

// With sharp at hand (bundle.sh's node/ + tessera/ parts, or solo/ with sharp) tessera runs end to end from the
// image file HF's processor read (decode, EXIF, resize and normalise its own); without it (no-sharp.mjs), from HF's
// pixel values.
const SHARP = existsSync(fileURLToPath(new URL('../../node_modules/sharp/package.json', import.meta.url)));

/** One run (a child process): the tower at one precision, every image, every stage against HF fp32. */
async function child({ dir, precision }) {
  const tower = await VisionTower.open(join(dir, 'model'), { backend: 'cpu', precision });
  const out = { precision: tower.info.precision, simdLevel: addon().simdLevel, bf16Level: addon().bf16Level, input: SHARP ? 'file' : 'pixels', images: {} };
  const hf = JSON.parse(readFileSync(join(dir, 'hf-bf16.json'), 'utf8'));
  try {
    for (const f of readdirSync(dir).filter((f) => f.endsWith('.safetensors')).sort()) {
      const ref = await readTensors(join(dir, f));
      const file = hf.images[f.replace(/\.safetensors$/, '')]?.path;
      const t0 = performance.now();
      const r = SHARP && file && existsSync(file)
        ? await tower.encode(file, { stages: true })
        : await tower.encodePixels(towerInput(ref), { stages: true });
      const ms = performance.now() - t0;
      const errs = {};
      for (const [name, want] of Object.entries(ref)) {
        if (INPUT_TENSORS.has(name)) continue;
        const ours = stageOf(r, name);
        if (!ours || ours.length !== want.length) throw new Error(`${f}: stage ${name}: ${ours ? `${ours.length} values, HF ${want.length}` : 'missing'}`);
        errs[name] = maxRelErr(ours, want);
      }
      out.images[f.replace(/\.safetensors$/, '')] = { ms: Math.round(ms), errs };
    }
  } finally {
    await tower.close();
  }
  return out;
}

// tessera f32 against HF fp32: the CPU suite's tolerance
const F32_TOL = 1e-4;

function table(tower, hf, runs) {
  const bfRuns = runs.filter((r) => r.want === 'bf16');
  const f32Run = runs.find((r) => r.want === 'f32');
  const lines = [
    `### ${tower} (${hf.gpu ? `HF on the CPU and ${hf.gpu}` : 'HF on the CPU'}; torch ${hf.torch}, transformers ${hf.transformers}; tessera from ${f32Run.out.input === 'file' ? 'the image files' : "HF's pixel values"})`, '',
    `| image (patches) | stage | tessera f32 | ${bfRuns.map((r) => `tessera bf16 (${r.label})`).join(' | ')} | HF bf16 CPU | HF bf16 CUDA | tessera bf16 ≤ HF bf16 |`,
    `| --- | --- | --- | ${bfRuns.map(() => '---').join(' | ')} | --- | --- | --- |`,
  ];
  const verdicts = [];
  for (const [img, h] of Object.entries(hf.images)) {
    const stages = Object.keys(h.cpu).sort(stageOrder);
    const last = stages.filter((s) => s.startsWith('block.')).at(-1);
    for (const s of stages) {
      const bound = Math.min(h.cpu[s], h.cuda?.[s] ?? Infinity);
      const ours = bfRuns.map((r) => r.out.images[img]?.errs[s]);
      const ok = ours.every((v) => v !== undefined && v <= bound);
      verdicts.push({ img, stage: s, ok, ours, bound });
      // the table shows the outputs and the last block; the verdict line below covers every block
      if (s.startsWith('block.') && s !== last) continue;
      lines.push(`| ${img} (${h.patches}) | ${s} | ${e(runs.find((r) => r.want === 'f32').out.images[img]?.errs[s])} | ${ours.map(e).join(' | ')} | ${e(h.cpu[s])} | ${e(h.cuda?.[s])} | ${ok ? 'yes' : '**no**'} |`);
    }
  }
  const f32Errs = Object.values(f32Run.out.images).flatMap((i) => Object.values(i.errs));
  const f32Worst = Math.max(...f32Errs);
  lines.push('', `tessera f32 against HF fp32, worst of every stage of every image (${f32Errs.length}): ${e(f32Worst)} (${f32Worst <= F32_TOL ? 'within' : '**past**'} ${F32_TOL}).`);
  const bad = verdicts.filter((v) => !v.ok);
  lines.push('', bad.length === 0
    ? `Every stage of every image (all ${verdicts.length}, each block included), at every level: tessera bf16 ≤ HF's own bf16 error.`
    : `tessera bf16 above HF's own bf16 error at ${bad.length} of ${verdicts.length} (image, stage): ${bad.map((v) => `${v.img} ${v.stage} (${v.ours.map(e).join(', ')} vs ${e(v.bound)})`).join('; ')}.`);
  lines.push('', `Encode ms per image (tessera, ${runs.map((r) => r.label).join(' / ')}): ${Object.keys(hf.images).map((img) => `${img} ${runs.map((r) => r.out.images[img]?.ms).join(' / ')}`).join('; ')}.`);
  return lines.join('\n');
}

async function main(argv) {
  if (argv[0] === '--child') {
    process.stdout.write(JSON.stringify(await child(JSON.parse(argv[1]))));
    return;
  }
  const dir = argv[0];
  const opt = (k, d) => { const i = argv.indexOf(k); return i >= 0 ? argv[i + 1] : d; };
  const levels = opt('--levels', 'amx avx512-bf16').split(/\s+/).filter(Boolean);
  const jsonFile = opt('--json', null);
  const self = fileURLToPath(import.meta.url);
  const all = {};
  for (const tower of ['qwen3_vl', 'gemma4', 'qwen2_5_vl']) {
    const tdir = join(dir, tower);
    if (!existsSync(join(tdir, 'hf-bf16.json'))) continue;
    const hf = JSON.parse(readFileSync(join(tdir, 'hf-bf16.json'), 'utf8'));
    const specs = [{ label: 'f32', want: 'f32', env: {} }, ...levels.map((l) => ({ label: l, want: 'bf16', env: { TESSERA_SIMD: l } }))];
    const runs = [];
    for (const s of specs) {
      const r = spawnSync(process.execPath, [self, '--child', JSON.stringify({ dir: tdir, precision: s.want })], {
        env: { ...process.env, ...s.env }, encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'inherit'],
      });
      if (r.status !== 0) throw new Error(`${tower} ${s.label}: child exited ${r.status ?? r.signal}`);
      const out = JSON.parse(r.stdout);
      // never count an f32 fallback as a bf16 figure
      if (out.precision !== s.want) throw new Error(`${tower} ${s.label}: tessera ran ${out.precision} (bf16Level ${out.bf16Level}), not ${s.want}`);
      process.stderr.write(`compare: ${tower} ${s.label}: ran ${out.precision} at ${out.simdLevel} (bf16Level ${out.bf16Level})\n`);
      runs.push({ ...s, out });
    }
    all[tower] = { hf, runs };
    // each tower as soon as it is done: a run cut short keeps the towers it finished
    console.log(table(tower, hf, runs) + '\n');
    if (jsonFile) writeFileSync(jsonFile, JSON.stringify(all, null, 1));
  }
}

await main(process.argv.slice(2));
