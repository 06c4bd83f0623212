#!/usr/bin/env node
// Writes the tessera outputs that check.py hands to the engines' code: `tessera encode --out-dir
// --format F` for every engine format, with the test fixtures' tiny towers, in f32 and in each
// narrower --out-dtype the format can hold, plus one SGLang item for a two-page request
// (toSglangItemJson of both pages). Needs the built package (`npm run build:ts`).
//   node verify/downstream-check/make-outputs.mjs OUT
// Layout: OUT/<family>/<format> (f32), OUT/<family>/<dtype>/<format> (bf16, f16),
// OUT/<family>/sglang-two-pages.json.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = resolve(process.argv[2] ?? join(root, '.cache', 'downstream-check-outputs'));
const { VisionTower, toSglangItemJson } = await import(join(root, 'dist', 'index.js'));
const { OUTPUT_DTYPES, outputDtypeUnsupported } = await import(join(root, 'dist', 'options.js'));

const fixtures = join(root, 'test', 'fixtures');
const image = (f) => join(fixtures, 'images', f);
// The Qwen2 families use two of their fixture cases (test/fixtures/qwen2*-tiny/cases.json: the same
// images at the same max_pixels), so that check.py can hold the rows the engines read against HF
// transformers' own merger output for those images; the grids differ (14 x 14 and a thin 2 x 46).
const qwen2Pages = ['astronaut.jpg', 'rocket_thin.png'].map(image);
const qwen3Pages = ['coffee.png', 'tiny.png'].map(image);
const VLLM_AND_SGLANG = ['vllm', 'vllm-torch', 'vllm-encoder-cache', 'sglang'];
const models = {
  qwen3_vl: { path: join(fixtures, 'qwen3_vl-tiny', 'model'), pages: qwen3Pages, flags: ['--max-pixels', '32768'], options: { maxPixels: 32768 }, formats: VLLM_AND_SGLANG },
  qwen3_5: { path: join(fixtures, 'qwen3_5-tiny', 'model'), pages: qwen3Pages, flags: ['--max-pixels', '32768'], options: { maxPixels: 32768 }, formats: VLLM_AND_SGLANG },
  qwen2_vl: { path: join(fixtures, 'qwen2_vl-tiny', 'model'), pages: qwen2Pages, flags: ['--max-pixels', '40000'], options: { maxPixels: 40000 }, formats: VLLM_AND_SGLANG },
  qwen2_5_vl: { path: join(fixtures, 'qwen2_5_vl-tiny', 'model'), pages: qwen2Pages, flags: ['--max-pixels', '40000'], options: { maxPixels: 40000 }, formats: VLLM_AND_SGLANG },
  gemma4: { path: join(fixtures, 'gemma4-tiny', 'model'), pages: qwen3Pages, flags: ['--max-soft-tokens', '70'], options: { maxSoftTokens: 70 }, formats: ['sglang'] },
};

mkdirSync(out, { recursive: true });
for (const [family, m] of Object.entries(models)) {
  for (const dtype of OUTPUT_DTYPES) {
    for (const format of m.formats) {
      if (outputDtypeUnsupported(format, dtype)) continue; // tessera refuses it (bf16 in .npy); nothing to hand on
      const dir = dtype === 'f32' ? join(out, family, format) : join(out, family, dtype, format);
      const args = [join(root, 'dist', 'cli', 'main.js'), 'encode', ...m.pages, '--model', m.path, ...m.flags, '--out-dir', dir, '--format', format, '--out-dtype', dtype, '--force'];
      const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`tessera encode --format ${format} --out-dtype ${dtype} (${family}) exited ${r.status}: ${r.stderr}`);
      process.stdout.write(`${family} ${format} ${dtype}: ${r.stdout.trim().split('\n').pop()}\n`);
    }
  }
  // One SGLang item for a request about both pages.
  const tower = await VisionTower.open(m.path, { backend: 'cpu' });
  const results = [];
  for (const p of m.pages) results.push(await tower.encode(p, m.options));
  await tower.close();
  writeFileSync(join(out, family, 'sglang-two-pages.json'), toSglangItemJson(results));
}
process.stdout.write(`outputs in ${out}\n`);
