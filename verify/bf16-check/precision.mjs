// test/api-precision.test.ts's bf16 check as a plain Node script, for a host with bf16 units where
// vitest is not at hand (docs/bf16.md): the fixture towers in bf16 against HF fp32 (expected/), each
// stage held to HF's own bf16 error for that image and stage (hf-bf16.json, strictly below, as the
// test holds it), and precision 'bf16' must actually run (info.precision). Prints a Markdown table
// and exits 1 where a stage is not within the bound or bf16 did not run.
//   TESSERA_SIMD=amx node verify/bf16-check/precision.mjs [test/fixtures]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { VisionTower } from '../../dist/index.js';
import { addon } from '../../dist/native.js';
import { maxRelErr } from '../../dist/doctor.js';
import { readTensors, stageOf, towerInput } from './tensors.mjs';

const fixtures = process.argv[2] ?? 'test/fixtures';
const FAMILIES = ['qwen3_5-tiny', 'qwen3_vl-tiny', 'qwen2_vl-tiny', 'qwen2_5_vl-tiny', 'gemma4-tiny'];
const lines = [`TESSERA_SIMD=${process.env.TESSERA_SIMD ?? '(unset)'}: simdLevel ${addon().simdLevel}, bf16Level ${addon().bf16Level}`, '',
  '| fixture | image | stage | tessera f32 | tessera bf16 | HF bf16 (bound) | within |', '| --- | --- | --- | --- | --- | --- | --- |'];
let failed = 0, checked = 0, notRun = 0;
for (const family of FAMILIES) {
  const dir = join(fixtures, family);
  const hf = JSON.parse(readFileSync(join(dir, 'hf-bf16.json'), 'utf8')).cases;
  const f32 = await VisionTower.open(join(dir, 'model'), { backend: 'cpu' });
  const bf = await VisionTower.open(join(dir, 'model'), { backend: 'cpu', precision: 'bf16' });
  try {
    if (bf.info.precision !== 'bf16') { lines.push(`| ${family} | – | – | – | ran ${bf.info.precision} | – | **no**: bf16 did not run |`); notRun++; continue; }
    for (const [name, bounds] of Object.entries(hf)) {
      const ref = await readTensors(join(dir, 'expected', `${name}.safetensors`));
      const a = await f32.encodePixels(towerInput(ref), { stages: true });
      const b = await bf.encodePixels(towerInput(ref), { stages: true });
      for (const [stage, bound] of Object.entries(bounds)) {
        const err = maxRelErr(stageOf(b, stage), ref[stage]);
        const ok = err < bound;
        checked++; if (!ok) failed++;
        lines.push(`| ${family} | ${name} | ${stage} | ${maxRelErr(stageOf(a, stage), ref[stage]).toExponential(2)} | ${err.toExponential(2)} | ${bound.toExponential(2)} | ${ok ? 'yes' : '**no**'} |`);
      }
    }
  } finally {
    await f32.close();
    await bf.close();
  }
}
lines.push('', `${checked - failed} of ${checked} stages within HF's own bf16 error${failed ? `; ${failed} not` : ''}${notRun ? `; bf16 did not run on ${notRun} of ${FAMILIES.length} fixtures` : ''}.`);
console.log(lines.join('\n'));
process.exitCode = failed || notRun ? 1 : 0;
