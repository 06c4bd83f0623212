#!/usr/bin/env node
// Records the exact bits of every stage of every fixture tower, so a refactor that must not change a result
// can prove it did not: run `record` before moving a line, `compare` after each step.
//
//   node tools/stage-bits.mjs record [FILE]    write FILE (default build/stage-bits.json)
//   node tools/stage-bits.mjs compare [FILE]   recompute and list every stage whose bits differ (exit 1 if any)
//
// What is covered: each fixture tower under test/fixtures (HF folders, and GGUF files beside them), each of its
// cases run as HF's own pixel rows (encodePixels, stages on), on the cpu backend at every SIMD level this CPU has
// (TESSERA_SIMD caps the ladder; it is read once per process, so each level runs in a child) in f32 and bf16,
// and on metal-emulated when the emulator builds here. A stage is recorded as the SHA-256 of its f32 bytes.
// It loads the built library (dist/): run `npm run build:ts` after changing TypeScript, and `node-gyp build`
// after changing native code.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FIXTURES = path.join(ROOT, 'test', 'fixtures');
const LEVELS = ['scalar', 'avx2', 'avx512', 'avx512-bf16', 'amx', 'neon'];

// The towers: every fixture folder with a model/ (and every .gguf beside it), with its cases.
function towers() {
  const out = [];
  for (const dir of readdirSync(FIXTURES).sort()) {
    const base = path.join(FIXTURES, dir);
    if (!existsSync(path.join(base, 'model')) || !existsSync(path.join(base, 'expected'))) continue;
    const cases = readdirSync(path.join(base, 'expected')).filter((f) => f.endsWith('.safetensors') && f !== 'batch.safetensors').map((f) => f.slice(0, -12)).sort();
    out.push({ name: `${dir}/model`, model: path.join(base, 'model'), expected: path.join(base, 'expected'), cases });
    for (const f of readdirSync(base).filter((f) => f.endsWith('.gguf')).sort())
      out.push({ name: `${dir}/${f}`, model: path.join(base, f), expected: path.join(base, 'expected'), cases });
  }
  return out;
}

function readSafetensors(file) {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const out = {};
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const bytes = new Uint8Array(buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]));
    out[name] = { dtype: h.dtype, bytes };
  }
  return out;
}

function pixelInput(ref) {
  const pixelValues = new Float32Array(ref.pixel_values.bytes.buffer.slice(0));
  if (ref.positions) return { pixelValues, positions: Int32Array.from(new BigInt64Array(ref.positions.bytes.buffer.slice(0)), Number) };
  const [t, h, w] = Array.from(new BigInt64Array(ref.image_grid_thw.bytes.buffer.slice(0)), Number);
  return { pixelValues, grid: { t, h, w } };
}

const sha = (a) => createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex').slice(0, 24);

// One child: every tower and case on one backend / precision, at the SIMD level the environment caps.
async function child(backend, precision) {
  const { VisionTower } = await import(path.join(ROOT, 'dist', 'index.js'));
  const result = {};
  for (const t of towers()) {
    let tower;
    try {
      tower = await VisionTower.open(t.model, { backend, precision });
    } catch (e) {
      result[t.name] = { error: `${e.code ?? ''} ${e.message}`.slice(0, 200) };
      continue;
    }
    try {
      for (const c of t.cases) {
        const ref = readSafetensors(path.join(t.expected, `${c}.safetensors`));
        const r = await tower.encodePixels(pixelInput(ref), { stages: true });
        const stages = {};
        for (const [name, v] of Object.entries(r.stages ?? {})) stages[name] = sha(v);
        (r.deepstack ?? []).forEach((v, k) => { stages[`deepstack.${k}`] = sha(v); });
        stages.embeddings = sha(r.embeddings);
        result[`${t.name} ${c} ${tower.info.backend} ${tower.info.precision}`] = stages;
      }
    } finally {
      await tower.close();
    }
  }
  process.stdout.write(JSON.stringify(result));
}

function runChild(env, backend, precision) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), 'child', backend, precision], {
    env: { ...process.env, ...env }, encoding: 'utf8', maxBuffer: 1 << 28,
  });
  if (r.status !== 0) throw new Error(`child ${backend} ${precision} ${JSON.stringify(env)} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

function collect() {
  const all = {};
  // A level this CPU lacks falls back to a lower one; it is recorded under its own key all the same, so a
  // fallback that changed would show.
  for (const level of LEVELS)
    for (const precision of ['f32', 'bf16'])
      for (const [k, v] of Object.entries(runChild({ TESSERA_SIMD: level }, 'cpu', precision))) all[`${k} simd=${level}`] = v;
  // metal-emulated needs clang-19 (docs/metal-on-linux.md); without it the runs are recorded as missing.
  try {
    for (const precision of ['f32', 'bf16'])
      for (const [k, v] of Object.entries(runChild({}, 'metal-emulated', precision))) all[`${k} asked=${precision}`] = v;
  } catch (e) {
    console.error(`stage-bits: metal-emulated not run: ${String(e.message).split('\n').slice(0, 3).join(' ')}`);
  }
  return all;
}

const [cmd = 'record', file = path.join(ROOT, 'build', 'stage-bits.json')] = process.argv.slice(2);
if (cmd === 'child') {
  await child(process.argv[3], process.argv[4]);
} else if (cmd === 'record') {
  mkdirSync(path.dirname(file), { recursive: true });
  const all = collect();
  writeFileSync(file, JSON.stringify(all, null, 1));
  console.log(`stage-bits: ${Object.keys(all).length} runs recorded in ${file}`);
} else if (cmd === 'compare') {
  const before = JSON.parse(readFileSync(file, 'utf8'));
  const now = collect();
  let diffs = 0;
  for (const key of new Set([...Object.keys(before), ...Object.keys(now)])) {
    const a = before[key], b = now[key];
    if (JSON.stringify(a) === JSON.stringify(b)) continue;
    if (!a || !b) { console.log(`${key}: ${a ? 'missing now' : 'new'}`); diffs++; continue; }
    for (const s of new Set([...Object.keys(a), ...Object.keys(b)]))
      if (a[s] !== b[s]) { console.log(`${key} ${s}: ${a[s]} -> ${b[s]}`); diffs++; }
  }
  console.log(diffs ? `stage-bits: ${diffs} differences` : `stage-bits: all ${Object.keys(before).length} runs identical`);
  process.exitCode = diffs ? 1 : 0;
} else {
  console.error('usage: node tools/stage-bits.mjs record|compare [FILE]');
  process.exitCode = 2;
}
