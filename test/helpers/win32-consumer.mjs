// Run by Windows node.exe under Wine (test/package-install.test.ts) in an app that installed the packed
// tarball for win32-x64: node win32-consumer.mjs <app folder> <fixtures folder> <image>...
// Prints one JSON object:
//   towers   every fixture family's tower in every residency: each stage's max |ours - HF| / max |HF|
//            (HF's fp32 outputs from the fixture's expected/<case>.safetensors)
//   images   sharp's win32 build decoding each image: width, height, channels, sha256 of the pixels
//   encode   the library's encode of the first image with the first tower: tokens, width, sha256
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [app, fixtures, ...images] = process.argv.slice(2);
const { VisionTower } = await import(pathToFileURL(join(app, 'node_modules', 'tessera-vision', 'dist', 'index.js')).href);
const sharp = createRequire(join(app, 'package.json'))('sharp');

// Every tensor of a safetensors file (small fixture files).
function tensors(path) {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8'));
  const out = new Map();
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    out.set(name, { dtype: h.dtype, bytes: buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]) });
  }
  return out;
}
const f32 = (b) => new Float32Array(new Uint8Array(b).buffer);
const i64 = (b) => Array.from(new BigInt64Array(new Uint8Array(b).buffer), Number);
function relErr(ours, ref) {
  if (ours.length !== ref.length) return Infinity;
  let num = 0, den = 0;
  for (let i = 0; i < ref.length; i++) {
    num = Math.max(num, Math.abs(ours[i] - ref[i]));
    den = Math.max(den, Math.abs(ref[i]));
  }
  return num / den;
}
const sha = (a) => createHash('sha256').update(new Uint8Array(a.buffer, a.byteOffset, a.byteLength)).digest('hex');

const TOWERS = [
  { dir: 'qwen3_5-tiny', caseName: 'coffee' },
  { dir: 'qwen3_vl-tiny', caseName: 'coffee' },
  { dir: 'gemma4-tiny', caseName: 'coffee' },
];
const INPUTS = new Set(['pixel_values', 'image_grid_thw', 'positions']);
const result = { towers: [], images: [], encode: null };
for (const t of TOWERS) {
  const ref = tensors(join(fixtures, t.dir, 'expected', `${t.caseName}.safetensors`));
  const pixelValues = f32(ref.get('pixel_values').bytes);
  const input = ref.has('positions')
    ? { pixelValues, positions: Int32Array.from(i64(ref.get('positions').bytes)) }
    : (([gt, gh, gw]) => ({ pixelValues, grid: { t: gt, h: gh, w: gw } }))(i64(ref.get('image_grid_thw').bytes));
  for (const residency of ['stream', 'mapped', 'resident']) {
    const tower = await VisionTower.open(join(fixtures, t.dir, 'model'), { backend: 'cpu', residency });
    try {
      const r = await tower.encodePixels(input, { stages: true });
      const stages = {};
      for (const [name, v] of ref) {
        if (INPUTS.has(name) || v.dtype !== 'F32') continue;
        stages[name] = r.stages[name] ? relErr(r.stages[name], f32(v.bytes)) : null;
      }
      result.towers.push({ tower: `${t.dir}/${t.caseName}`, residency: tower.info.residency, simd: tower.info.simd ?? null, stages });
    } finally {
      await tower.close();
    }
  }
}
for (const image of images) {
  const { data, info } = await sharp(image).raw().toBuffer({ resolveWithObject: true });
  result.images.push({ image, width: info.width, height: info.height, channels: info.channels, sha: sha(data) });
}
const tower = await VisionTower.open(join(fixtures, TOWERS[0].dir, 'model'), { backend: 'cpu' });
try {
  const r = await tower.encode(images[0]);
  result.encode = { tokens: r.tokens, width: r.width, sha: sha(r.embeddings) };
} finally {
  await tower.close();
}
console.log(JSON.stringify(result));
