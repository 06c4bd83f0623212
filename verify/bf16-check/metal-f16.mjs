// The full-size half of the f16 check (docs/metal.md#full-size-towers): tessera's precision 'f16' on
// metal-emulated (the Metal kernels run by the MSL emulator on the CPU, TESSERA_MSLEMU_LIB and
// TESSERA_MSLEMU_WORKERS as the addon reads them) on the tower folders verify/bf16-check/hf_towers.py wrote
// (DIR/<tower>/model and one <image>.safetensors per image with the tower's input and HF fp32's stages),
// every stage against HF fp32 as max |diff| / max |ref| (the library's maxRelErr), beside HF's own fp16 error
// that verify/bf16-check/hf_f16_towers.py wrote (DIR/<tower>/hf-f16.json, on CUDA). Only the images both
// wrote run. Prints a Markdown table per tower (the outputs and the last block; the verdict line covers every
// block) and, with --json, every figure, written after each image: the emulator takes minutes per image at
// full size, and a run cut short keeps what it finished. DIR is run.sh's work folder's fullsize/, or the folder
// unpack-refs.sh remade from another host's `run.sh refill hf f16 refs` (the emulator needs hours where HF needs
// seconds, so the two sides usually run apart).
//   node verify/bf16-check/metal-f16.mjs DIR [--towers qwen3_vl,gemma4] [--json FILE]
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { VisionTower } from '../../dist/index.js';
import { maxRelErr } from '../../dist/doctor.js';
import { INPUT_TENSORS, e, readTensors, stageOf, stageOrder, towerInput } from './tensors.mjs';

/** One tower: every image both HF steps measured, through metal-emulated in f16; `done(out)` after each. */
async function measure(dir, done) {
  const budget = JSON.parse(readFileSync(join(dir, 'hf-f16.json'), 'utf8'));
  const tower = await VisionTower.open(join(dir, 'model'), { backend: 'metal-emulated', precision: 'f16' });
  const out = { precision: tower.info.precision, workers: process.env.TESSERA_MSLEMU_WORKERS ?? 'hardware concurrency', hf: budget, images: {} };
  try {
    // never count an f32 fallback as an f16 figure
    if (out.precision !== 'f16') throw new Error(`${dir}: tessera ran ${out.precision}, not f16`);
    const images = readdirSync(dir).filter((f) => f.endsWith('.safetensors')).map((f) => f.replace(/\.safetensors$/, ''))
      .filter((img) => budget.images[img]?.f16_vs_fp32).sort((a, b) => budget.images[a].patches - budget.images[b].patches);
    for (const img of images) {
      const ref = await readTensors(join(dir, `${img}.safetensors`));
      const t0 = performance.now();
      const r = await tower.encodePixels(towerInput(ref), { stages: true });
      const ms = performance.now() - t0;
      const errs = {};
      for (const [name, want] of Object.entries(ref)) {
        if (INPUT_TENSORS.has(name)) continue;
        const ours = stageOf(r, name);
        if (!ours || ours.length !== want.length) throw new Error(`${img}: stage ${name}: ${ours ? `${ours.length} values, HF ${want.length}` : 'missing'}`);
        errs[name] = maxRelErr(ours, want);
      }
      out.images[img] = { patches: budget.images[img].patches, ms: Math.round(ms), errs };
      process.stderr.write(`metal-f16: ${dir} ${img} (${out.images[img].patches} patches): ${Math.round(ms / 1000)} s\n`);
      done(out);
    }
  } finally {
    await tower.close();
  }
  return out;
}

const range = (vs) => (vs.length ? `${e(Math.min(...vs))} to ${e(Math.max(...vs))}` : '–');

function table(name, out) {
  const hf = out.hf;
  const lines = [
    `### ${name} (tessera f16 on metal-emulated, ${out.workers} workers; HF fp16 on ${hf.gpu}, torch ${hf.torch}, transformers ${hf.transformers}; both against HF fp32)`, '',
    '| image (patches) | stage | tessera f16 | HF fp16 | tessera f16 ≤ HF fp16 |',
    '| --- | --- | --- | --- | --- |',
  ];
  const verdicts = [];
  const summary = [];
  for (const [img, o] of Object.entries(out.images)) {
    const bound = hf.images[img].f16_vs_fp32;
    const stages = Object.keys(o.errs).sort(stageOrder);
    const blocks = stages.filter((s) => s.startsWith('block.'));
    for (const s of stages) {
      // a stage HF's fp16 run does not give has no budget: shown, not judged
      const ok = bound[s] === undefined ? undefined : o.errs[s] <= bound[s];
      if (ok !== undefined) verdicts.push({ img, stage: s, ok, ours: o.errs[s], bound: bound[s] });
      if (s.startsWith('block.') && s !== blocks.at(-1)) continue;
      lines.push(`| ${img} (${o.patches}) | ${s} | ${e(o.errs[s])} | ${e(bound[s])} | ${ok === undefined ? '–' : ok ? 'yes' : '**no**'} |`);
    }
    const worst = Math.max(...stages.filter((s) => bound[s] !== undefined).map((s) => o.errs[s] / bound[s]));
    summary.push(`${img}: blocks ${range(blocks.map((s) => o.errs[s]))} (HF fp16 ${range(blocks.map((s) => bound[s]))}), worst ratio to HF ${worst.toFixed(2)}, ${Math.round(o.ms / 1000)} s`);
  }
  const bad = verdicts.filter((v) => !v.ok);
  lines.push('', ...summary.map((s) => `- ${s}`));
  lines.push('', bad.length === 0
    ? `Every stage of every image (all ${verdicts.length}, each block included): tessera f16 ≤ HF's own fp16 error.`
    : `tessera f16 above HF's own fp16 error at ${bad.length} of ${verdicts.length} (image, stage): ${bad.map((v) => `${v.img} ${v.stage} (${e(v.ours)} vs ${e(v.bound)})`).join('; ')}.`);
  return lines.join('\n');
}

async function main(argv) {
  const dir = argv[0];
  const opt = (k, d) => { const i = argv.indexOf(k); return i >= 0 ? argv[i + 1] : d; };
  const jsonFile = opt('--json', null);
  const all = {};
  for (const name of opt('--towers', 'qwen3_vl,gemma4').split(',')) {
    const tdir = join(dir, name);
    if (!existsSync(join(tdir, 'hf-f16.json'))) continue;
    // each image as soon as it is done: a run cut short keeps the images it finished
    all[name] = await measure(tdir, (out) => { all[name] = out; if (jsonFile) writeFileSync(jsonFile, JSON.stringify(all, null, 1)); });
    console.log(table(name, all[name]) + '\n');
  }
}

await main(process.argv.slice(2));
