#!/usr/bin/env node
// npm run bench: runs every bench piece in scripts/bench/*.mjs (each exports `section()` →
// { title, body } in Markdown) and writes BENCHMARKS.md with the command and the machine.
// Pieces may be picked by name: npm run bench -- qwen-tower residency
import { readdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execSync } from 'node:child_process';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = join(root, 'scripts', 'bench');
const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const pieces = readdirSync(dir)
  .filter((f) => f.endsWith('.mjs'))
  .sort()
  .filter((f) => wanted.length === 0 || wanted.includes(f.replace(/\.mjs$/, '')));

execSync('npx tsc -p tsconfig.json', { cwd: root, stdio: 'inherit' });

const sections = [];
for (const f of pieces) {
  const mod = await import(join(dir, f));
  if (typeof mod.section !== 'function') continue;
  process.stderr.write(`bench: ${f} ...\n`);
  const t0 = Date.now();
  const s = await mod.section();
  process.stderr.write(`bench: ${f} done in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  sections.push(`## ${s.title}\n\n${s.body}\n`);
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
const machine = `${cpu}, ${cpus().length} logical cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${process.platform}/${process.arch}, Node ${process.version}`;
const { addon } = await import(join(root, 'dist', 'native.js'));
const text = `# Benchmarks

Produced by \`npm run bench${wanted.length ? ' -- ' + wanted.join(' ') : ''}\` (scripts/bench.mjs) on ${new Date().toISOString().slice(0, 10)}.
Machine: ${machine}; SIMD path: ${addon().simdLevel}.
Nothing here is asserted by a test; the figures are measurements of this machine at that time (a shared
2-core VM: expect ±10 % between runs). Metal figures need a Mac (\`npm run bench -- --backend metal\`): none are
claimed here.

${sections.join('\n')}`;
writeFileSync(join(root, 'BENCHMARKS.md'), text);
process.stderr.write('bench: wrote BENCHMARKS.md\n');
