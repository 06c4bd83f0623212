#!/usr/bin/env node
// npm run bench: runs every bench piece in bench/pieces/*.mjs (each exports `section()` →
// { title, body } in Markdown) and writes BENCHMARKS.md with the command and the machine.
// Pieces may be picked by name (npm run bench -- qwen-tower residency): their sections replace the
// same pieces' sections in the existing BENCHMARKS.md, the others are kept as they were.
// --backend B (cpu | metal | metal-emulated) is what the tower pieces open (TESSERA_BENCH_BACKEND).
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execSync } from 'node:child_process';

const root = fileURLToPath(new URL('..', import.meta.url));
const bench = join(root, 'bench');
const dir = join(bench, 'pieces');
const args = process.argv.slice(2);
const backendAt = args.indexOf('--backend');
if (backendAt >= 0) process.env['TESSERA_BENCH_BACKEND'] = args[backendAt + 1] ?? 'cpu';
const wanted = args.filter((a, i) => !a.startsWith('-') && (backendAt < 0 || i !== backendAt + 1));
const pieces = readdirSync(dir)
  .filter((f) => f.endsWith('.mjs'))
  .sort()
  .filter((f) => wanted.length === 0 || wanted.includes(f.replace(/\.mjs$/, '')));

execSync('npx tsc -p tsconfig.json', { cwd: root, stdio: 'inherit' });
// The bench's own dependencies (bench/package.json: onnxruntime-node, onnx-proto), kept off
// the library's install, are installed on the first run.
if (!existsSync(join(bench, 'node_modules', 'onnxruntime-node')) || !existsSync(join(bench, 'node_modules', 'onnx-proto')))
  execSync('npm install --no-audit --no-fund', { cwd: bench, stdio: 'inherit' });

// Sections of an earlier run, by piece, kept when only some pieces run now.
const MARK = /^<!-- piece: ([\w-]+) -->$/m;
const previous = new Map();
const file = join(root, 'BENCHMARKS.md');
if (wanted.length && existsSync(file)) {
  const parts = readFileSync(file, 'utf8').split(/(?=^<!-- piece: [\w-]+ -->$)/m);
  for (const part of parts) {
    const m = MARK.exec(part);
    if (m) previous.set(m[1], part.trimEnd() + '\n');
  }
}

const sections = new Map(previous);
for (const f of pieces) {
  const mod = await import(join(dir, f));
  if (typeof mod.section !== 'function') continue;
  process.stderr.write(`bench: ${f} ...\n`);
  const t0 = Date.now();
  const s = await mod.section();
  process.stderr.write(`bench: ${f} done in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  const name = f.replace(/\.mjs$/, '');
  const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
  sections.set(name, `<!-- piece: ${name} -->\n## ${s.title}\n\n_Measured ${when} UTC (\`npm run bench -- ${name}\`)._\n\n${s.body}\n`);
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
const machine = `${cpu}, ${cpus().length} logical cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, ${process.platform}/${process.arch}, Node ${process.version}`;
const { addon } = await import(join(root, 'dist', 'native.js'));
const widening = addon().bf16Widening === 'unpack' ? 'unpacks' : 'a shift and a mask';
const text = `# Benchmarks

Produced by \`npm run bench\` (bench/run.mjs); each section says when its piece last ran (\`npm run bench -- <piece>\`
reruns one piece and keeps the others). Latest run: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, pieces: ${pieces.map((f) => f.replace(/\.mjs$/, '')).join(', ')}.
Machine: ${machine}; SIMD path: ${addon().simdLevel}; the AVX2 kernels widen bf16 weights by ${widening} on this CPU.
Nothing here is asserted by a test; the figures are measurements of the machine named above at that time
(on a machine shared with other work, expect ±10 % between runs). Metal figures need a Mac (\`npm run bench -- --backend metal\`): none are
claimed here.

${[...sections.keys()].sort().map((k) => sections.get(k)).join('\n')}`;
writeFileSync(join(root, 'BENCHMARKS.md'), text);
process.stderr.write('bench: wrote BENCHMARKS.md\n');
