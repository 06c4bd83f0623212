#!/usr/bin/env node
// Writes the tessera outputs that check.py hands to the engines' code: `tessera encode --out-dir
// --format F` for every engine format, with the test fixtures' tiny towers, plus one SGLang item
// for a two-page request (toSglangItemJson of both pages). Needs the built package
// (`npm run build:ts`).
//   node verify/downstream-check/make-outputs.mjs OUT
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const out = resolve(process.argv[2] ?? join(root, '.cache', 'downstream-check-outputs'));
const { VisionTower, toSglangItemJson } = await import(join(root, 'dist', 'index.js'));

const fixtures = join(root, 'test', 'fixtures');
const pages = ['coffee.png', 'tiny.png'].map((f) => join(fixtures, 'images', f));
const models = {
  qwen3_vl: { path: join(fixtures, 'qwen3_vl-tiny', 'model'), flags: ['--max-pixels', '32768'], options: { maxPixels: 32768 } },
  qwen3_5: { path: join(fixtures, 'qwen3_5-tiny', 'model'), flags: ['--max-pixels', '32768'], options: { maxPixels: 32768 } },
  gemma4: { path: join(fixtures, 'gemma4-tiny', 'model'), flags: ['--max-soft-tokens', '70'], options: { maxSoftTokens: 70 } },
};
const formats = {
  qwen3_vl: ['vllm', 'vllm-torch', 'vllm-encoder-cache', 'sglang'],
  qwen3_5: ['vllm', 'vllm-torch', 'vllm-encoder-cache', 'sglang'],
  gemma4: ['sglang'],
};

mkdirSync(out, { recursive: true });
for (const [family, m] of Object.entries(models)) {
  for (const format of formats[family]) {
    const dir = join(out, family, format);
    const r = spawnSync(process.execPath, [join(root, 'dist', 'cli', 'main.js'), 'encode', ...pages, '--model', m.path, ...m.flags, '--out-dir', dir, '--format', format, '--force'], { cwd: root, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`tessera encode --format ${format} (${family}) exited ${r.status}: ${r.stderr}`);
    process.stdout.write(`${family} ${format}: ${r.stdout.trim().split('\n').pop()}\n`);
  }
  // One SGLang item for a request about both pages.
  const tower = await VisionTower.open(m.path, { backend: 'cpu' });
  const results = [];
  for (const p of pages) results.push(await tower.encode(p, m.options));
  await tower.close();
  writeFileSync(join(out, family, 'sglang-two-pages.json'), toSglangItemJson(results));
}
process.stdout.write(`outputs in ${out}\n`);
