// --out-dir formats (src/bulk/): what `tessera encode --out-dir --format F` writes per image, read
// back independently of the writer. vllm: the content part, its image_embeds a base64 .npy of
// [tokens, (1 + deepstack) x width] f32 with the merged rows first and each deepstack level after,
// equal to HF's reference stages laid out that way, and its image_grid_thw int64 of shape (3,)
// (and numpy reads it, where numpy is installed); vllm-torch: the same tensors as torch.save
// archives, their pickles byte for byte torch's own; vllm-encoder-cache: vLLM's encoder-cache
// storage named by each input's SHA-256; sglang: the precomputed_embedding item, every number the
// shortest decimal that reads back to its float32, and one item for several pages; npy: one file
// per tensor; Gemma 4 is refused for the vLLM formats (vLLM takes no Gemma 4 image embeddings) and
// written for sglang. The engines' own code runs on these files in verify/downstream-check
// (docs/downstream.md); this suite keeps the byte layouts.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VisionTower, toSglangItemJson } from '../src/index.js';
import { f32ToJson } from '../src/outputs/f32-json.js';
import { torchSaveBytes } from '../src/outputs/torch-save.js';
import { FIXTURES, readTensors, relErr } from './helpers/fixtures.js';
import { readNpy } from './helpers/npy.js';
import { readStoredZip } from './helpers/torch-zip.js';
import { outputJob } from '../src/bulk/output-dir.js';
import { runGroup } from '../src/fleet/group-job.js';
import { tesseraInProcess as tessera } from './helpers/cli.js';

const IMAGES = join(FIXTURES, 'images');
let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'tessera-formats-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));


/** Where --out-dir puts an output for a fixture image named by its path: its path relative to the current folder. */
const at = (dir: string, name: string) => join(dir, relative(process.cwd(), IMAGES), name);

/**
 * Significant digits of a JSON number as tessera prints it ("16777216.0" has 8, "407668600000.0" 7,
 * "1e+2" 1, "0.05" 1), after checking that a fraction never ends in a zero (but for a whole number's ".0").
 */
function significantDigits(t: string): number {
  if (/\.\d*0(e|$)/.test(t) && !/^-?\d+\.0$/.test(t)) throw new Error(`${t} has a trailing zero`);
  return t.replace(/e.*$/, '').replace(/\.0$/, '').replace(/[-.]/g, '').replace(/^0+/, '').replace(/0+$/, '').length;
}

/** HF's reference rows for the vLLM / SGLang layout: per token, merged then deepstack 0, 1, ... */
function referenceRows(expected: string, levels: number): { rows: number; cols: number; data: Float32Array } {
  const t = readTensors(expected);
  const parts = [t['merged']!, ...Array.from({ length: levels }, (_, k) => t[`deepstack.${k}`]!)];
  const [rows, width] = parts[0]!.shape as [number, number];
  const data = new Float32Array(rows * width * parts.length);
  const f = parts.map((p) => p.f32());
  for (let r = 0; r < rows; r++) f.forEach((p, k) => data.set(p.subarray(r * width, (r + 1) * width), (r * parts.length + k) * width));
  return { rows, cols: width * parts.length, data };
}

describe('--format vllm', () => {
  it('Qwen3-VL: image_embeds [tokens, 3 x 128] = merged, deepstack.0, deepstack.1 per row (HF reference), image_grid_thw (3,) int64', async () => {
    const dir = join(tmp, 'vllm');
    const model = join(FIXTURES, 'qwen3_vl-tiny/model');
    const r = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', model, '--max-pixels', '32768', '--out-dir', dir, '--format', 'vllm');
    expect(r.code, r.stderr).toBe(0);
    const part = JSON.parse(readFileSync(at(dir, 'coffee.vllm.json'), 'utf8'));
    expect(Object.keys(part).sort()).toEqual(['image_embeds', 'type']);
    expect(part.type).toBe('image_embeds');
    expect(Object.keys(part.image_embeds).sort()).toEqual(['image_embeds', 'image_grid_thw']);
    const embeds = readNpy(Buffer.from(part.image_embeds.image_embeds, 'base64'));
    const grid = readNpy(Buffer.from(part.image_embeds.image_grid_thw, 'base64'));
    expect(embeds.descr).toBe('<f4');
    // The fixture tower has 2 deepstack levels (Qwen3-VL checkpoints have 3: [tokens, 4 x hidden]).
    expect(embeds.shape).toEqual([24, 3 * 128]);
    expect(grid.descr).toBe('<i8');
    // One image's grid per content part, shape (3,): vLLM stacks the parts' grids into [images, 3].
    expect(grid.shape).toEqual([3]);
    expect(Array.from(grid.data as BigInt64Array, Number)).toEqual([1, 8, 12]);
    const ref = referenceRows(join(FIXTURES, 'qwen3_vl-tiny/expected/coffee.safetensors'), 2);
    expect(relErr(embeds.data as Float32Array, ref.data)).toBeLessThan(1e-4);
    // Each third of a row is the tower's own output, bit for bit.
    const tower = await VisionTower.open(model, { backend: 'cpu' });
    const mine = await tower.encode(join(IMAGES, 'coffee.png'), { maxPixels: 32768 });
    await tower.close();
    const e = embeds.data as Float32Array;
    for (let t = 0; t < 24; t++) {
      const row = e.subarray(t * 384, (t + 1) * 384);
      expect(Array.from(row.subarray(0, 128))).toEqual(Array.from(mine.embeddings.subarray(t * 128, (t + 1) * 128)));
      expect(Array.from(row.subarray(128, 256))).toEqual(Array.from(mine.deepstack![0]!.subarray(t * 128, (t + 1) * 128)));
      expect(Array.from(row.subarray(256))).toEqual(Array.from(mine.deepstack![1]!.subarray(t * 128, (t + 1) * 128)));
    }
    // The record beside it says what it was made from.
    const rec = JSON.parse(readFileSync(at(dir, 'coffee.tessera.json'), 'utf8'));
    // Each file with its size and the SHA-256 of its bytes, verified on resume.
    const written = readFileSync(at(dir, 'coffee.vllm.json'));
    expect(rec.files).toEqual([{ name: 'coffee.vllm.json', bytes: written.length, sha256: createHash('sha256').update(written).digest('hex') }]);
    expect(rec.record).toMatchObject({ format: 'vllm', family: 'qwen3_vl', tokens: 24, input: relative(process.cwd(), join(IMAGES, 'coffee.png')) });
    // Numbers are numbers, the options an object (only safetensors' __metadata__ needs strings).
    expect(rec.record.input_size).toBe(statSync(join(IMAGES, 'coffee.png')).size);
    expect(typeof rec.record.input_mtime_ms).toBe('number');
    expect(typeof rec.record.width).toBe('number');
    expect(typeof rec.record.options).toBe('object');
  });

  it('numpy loads the embedded .npy bytes as vLLM does (np.load)', (ctx) => {
    const probe = spawnSync('python3', ['-c', 'import numpy'], { encoding: 'utf8' });
    if (probe.status !== 0) return ctx.skip('python3 with numpy is not installed (optional: it checks the .npy bytes with numpy itself)');
    const part = JSON.parse(readFileSync(at(join(tmp, 'vllm'), 'coffee.vllm.json'), 'utf8'));
    const py = `import sys, json, base64, io, numpy as np
p = json.load(open(sys.argv[1]))["image_embeds"]
e = np.load(io.BytesIO(base64.b64decode(p["image_embeds"]))); g = np.load(io.BytesIO(base64.b64decode(p["image_grid_thw"])))
print(json.dumps([list(e.shape), str(e.dtype), list(g.shape), str(g.dtype), g.tolist(), float(e[3, 200])]))`;
    writeFileSync(join(tmp, 'load.py'), py);
    const r = spawnSync('python3', [join(tmp, 'load.py'), at(join(tmp, 'vllm'), 'coffee.vllm.json')], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const [shape, dtype, gshape, gdtype, g, v] = JSON.parse(r.stdout);
    expect([shape, dtype, gshape, gdtype, g]).toEqual([[24, 384], 'float32', [3], 'int64', [1, 8, 12]]);
    expect(v).toBe(readNpy(Buffer.from(part.image_embeds.image_embeds, 'base64')).data[3 * 384 + 200]);
  });

  it('Qwen3.5 (no deepstack): [tokens, width]; Gemma 4 is refused before any work, naming vLLM', async () => {
    const dir = join(tmp, 'vllm35');
    const r = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', join(FIXTURES, 'qwen3_5-tiny/model'), '--max-pixels', '32768', '--out-dir', dir, '--format', 'vllm');
    expect(r.code, r.stderr).toBe(0);
    const part = JSON.parse(readFileSync(at(dir, 'coffee.vllm.json'), 'utf8'));
    const ref = readTensors(join(FIXTURES, 'qwen3_5-tiny/expected/coffee.safetensors'))['merged']!;
    const embeds = readNpy(Buffer.from(part.image_embeds.image_embeds, 'base64'));
    expect(embeds.shape).toEqual(ref.shape);
    expect(relErr(embeds.data as Float32Array, ref.f32())).toBeLessThan(1e-4);
    const g = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', join(FIXTURES, 'gemma4-tiny/model'), '--out-dir', join(tmp, 'g4'), '--format', 'vllm');
    expect(g.code).toBe(2);
    expect(g.stderr).toMatch(/vLLM's Gemma 4 model .* takes pixel values only/);
    for (const format of ['vllm-torch', 'vllm-encoder-cache']) {
      const h = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', join(FIXTURES, 'gemma4-tiny/model'), '--out-dir', join(tmp, 'g4'), '--format', format);
      expect(h.code, format).toBe(2);
      expect(h.stderr, format).toMatch(new RegExp(`--format ${format}: vLLM's Gemma 4 model`));
    }
  });

  // data.pkl of torch.save(torch.tensor([1, 8, 12])) and of torch.save(torch.zeros(24, 384)), as torch
  // 1.13 writes them (a tensor's pickle depends on its dtype and shape only, not on its values).
  const TORCH_PICKLE_I64_3 =
    '800263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a71002828580700000073746f72616765710163746f7263680a4c6f6e6753746f726167650a71025801000000307103580300000063707571044b03747105514b004b038571064b018571078963636f6c6c656374696f6e730a4f726465726564446963740a71082952710974710a52710b2e';
  const TORCH_PICKLE_F32_24x384 =
    '800263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a71002828580700000073746f72616765710163746f7263680a466c6f617453746f726167650a71025801000000307103580300000063707571044d0024747105514b004b184d80018671064d80014b018671078963636f6c6c656374696f6e730a4f726465726564446963740a71082952710974710a52710b2e';
  // torch.save(torch.zeros(300, 1024)): past 65,535 elements the count is a 4-byte int.
  const TORCH_PICKLE_F32_300x1024 =
    '800263746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a71002828580700000073746f72616765710163746f7263680a466c6f617453746f726167650a71025801000000307103580300000063707571044a00b00400747105514b004d2c014d00048671064d00044b018671078963636f6c6c656374696f6e730a4f726465726564446963740a71082952710974710a52710b2e';

  it('torchSaveBytes of a large tensor: the pickle torch writes for [300, 1024] f32, the data whole', () => {
    const data = Float32Array.from({ length: 300 * 1024 }, (_, i) => i / 7);
    const zip = readStoredZip(torchSaveBytes({ name: 'x', dtype: 'F32', shape: [300, 1024], data }));
    expect(zip.get('archive/data.pkl')!.data.toString('hex')).toBe(TORCH_PICKLE_F32_300x1024);
    expect(zip.get('archive/data/0')!.data.equals(Buffer.from(data.buffer))).toBe(true);
    expect(zip.get('archive/data/0')!.dataOffset % 64).toBe(0);
  });

  it('vllm-torch: the same tensors as torch.save archives (pickle byte for byte torch\'s, data 64-byte aligned, CRCs right)', async () => {
    const dir = join(tmp, 'vllm-torch');
    const r = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', join(FIXTURES, 'qwen3_vl-tiny/model'), '--max-pixels', '32768', '--out-dir', dir, '--format', 'vllm-torch');
    expect(r.code, r.stderr).toBe(0);
    const part = JSON.parse(readFileSync(at(dir, 'coffee.vllm.json'), 'utf8'));
    const npyPart = JSON.parse(readFileSync(at(join(tmp, 'vllm'), 'coffee.vllm.json'), 'utf8'));
    for (const [key, pickle] of [['image_embeds', TORCH_PICKLE_F32_24x384], ['image_grid_thw', TORCH_PICKLE_I64_3]] as const) {
      const zip = readStoredZip(Buffer.from(part.image_embeds[key], 'base64'));
      expect([...zip.keys()], key).toEqual(['archive/data.pkl', 'archive/byteorder', 'archive/data/0', 'archive/version']);
      expect([...zip.values()].every((m) => m.method === 0 && m.dataOffset % 64 === 0), key).toBe(true);
      expect(zip.get('archive/data.pkl')!.data.toString('hex'), key).toBe(pickle);
      expect(zip.get('archive/version')!.data.toString('latin1')).toBe('3\n');
      expect(zip.get('archive/byteorder')!.data.toString('latin1')).toBe('little');
      // The storage holds exactly the .npy part's data.
      const npyData = readNpy(Buffer.from(npyPart.image_embeds[key], 'base64')).data;
      expect(zip.get('archive/data/0')!.data.equals(Buffer.from(npyData.buffer, npyData.byteOffset, npyData.byteLength)), key).toBe(true);
    }
    const rec = JSON.parse(readFileSync(at(dir, 'coffee.tessera.json'), 'utf8'));
    expect(rec.record.format).toBe('vllm-torch');
  });

  it('vllm-encoder-cache: DIR/<sha256 of the image>/encoder_cache.safetensors holding ec_cache = the vllm rows; the record names the identifier', async () => {
    const dir = join(tmp, 'ec');
    const args = ['encode', join(IMAGES, 'coffee.png'), join(IMAGES, 'tiny.png'), '--model', join(FIXTURES, 'qwen3_vl-tiny/model'), '--max-pixels', '32768', '--out-dir', dir, '--format', 'vllm-encoder-cache'];
    const r = await tessera(...args);
    expect(r.code, r.stderr).toBe(0);
    const npyPart = JSON.parse(readFileSync(at(join(tmp, 'vllm'), 'coffee.vllm.json'), 'utf8'));
    const rows = readNpy(Buffer.from(npyPart.image_embeds.image_embeds, 'base64')).data as Float32Array;
    const sha = createHash('sha256').update(readFileSync(join(IMAGES, 'coffee.png'))).digest('hex');
    const file = readFileSync(join(dir, sha, 'encoder_cache.safetensors'));
    const n = Number(file.readBigUInt64LE(0));
    const header = JSON.parse(file.subarray(8, 8 + n).toString('utf8'));
    expect(Object.keys(header).filter((k) => k !== '__metadata__')).toEqual(['ec_cache']);
    expect(header.ec_cache).toMatchObject({ dtype: 'F32', shape: [24, 384] });
    const [start, end] = header.ec_cache.data_offsets as [number, number];
    const data = new Float32Array(new Uint8Array(file.subarray(8 + n + start, 8 + n + end)).buffer);
    expect(data).toEqual(rows);
    // The record sits where the image's other outputs would, names the identifier and the file.
    const rec = JSON.parse(readFileSync(at(dir, 'coffee.tessera.json'), 'utf8'));
    expect(rec.record).toMatchObject({ format: 'vllm-encoder-cache', identifier: sha, input_sha256: sha });
    expect(rec.files.map((f: { name: string }) => join(dirname(at(dir, 'coffee.tessera.json')), f.name))).toEqual([join(dir, sha, 'encoder_cache.safetensors')]);
    expect(rec.files[0]).toMatchObject({ bytes: file.byteLength, sha256: createHash('sha256').update(file).digest('hex') });
    const manifest = readFileSync(join(dir, 'manifest.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(manifest.find((m) => m.input.endsWith('coffee.png')).output).toMatch(/coffee\.tessera\.json$/);
    // A rerun finds both images up to date.
    const again = await tessera(...args);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/2 up to date|0 of 2/);
  });

  it('vllm-encoder-cache from a fleet group job: the worker hashes the inputs too and writes the same file', async () => {
    const dir = join(tmp, 'ec-fleet');
    const tower = await VisionTower.open(join(FIXTURES, 'qwen3_vl-tiny/model'), { backend: 'cpu' });
    const options = { maxPixels: 32768 };
    const out = outputJob(tower, { dir, format: 'vllm-encoder-cache', model: join(FIXTURES, 'qwen3_vl-tiny/model'), options });
    const outcome = await runGroup(tower, out, options, [{ input: join(IMAGES, 'coffee.png'), rel: 'coffee.png' }]);
    await tower.close();
    expect(outcome.images[0], JSON.stringify(outcome.images[0])).toMatchObject({ status: 'encoded' });
    const sha = createHash('sha256').update(readFileSync(join(IMAGES, 'coffee.png'))).digest('hex');
    const cliFile = readFileSync(join(tmp, 'ec', sha, 'encoder_cache.safetensors'));
    const fleetFile = readFileSync(join(dir, sha, 'encoder_cache.safetensors'));
    // The same ec_cache bytes (the headers' records differ: model path and input name).
    const data = (f: Buffer) => f.subarray(8 + Number(f.readBigUInt64LE(0)));
    expect(data(fleetFile).equals(data(cliFile))).toBe(true);
  });
});

describe('--format sglang and npy', () => {
  it('sglang: {format: precomputed_embedding, feature [tokens][cols], image_grid_thw [[t, h, w]]}, the f32 values exact', async () => {
    const dir = join(tmp, 'sglang');
    const model = join(FIXTURES, 'qwen3_vl-tiny/model');
    const r = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', model, '--max-pixels', '32768', '--out-dir', dir, '--format', 'sglang');
    expect(r.code, r.stderr).toBe(0);
    const item = JSON.parse(readFileSync(at(dir, 'coffee.sglang.json'), 'utf8'));
    expect(Object.keys(item).sort()).toEqual(['feature', 'format', 'image_grid_thw']);
    expect(item.format).toBe('precomputed_embedding');
    expect(item.image_grid_thw).toEqual([[1, 8, 12]]);
    expect(item.feature).toHaveLength(24);
    expect(item.feature.every((row: number[]) => row.length === 384)).toBe(true);
    const vllmPart = JSON.parse(readFileSync(at(join(tmp, 'vllm'), 'coffee.vllm.json'), 'utf8'));
    const rows = readNpy(Buffer.from(vllmPart.image_embeds.image_embeds, 'base64')).data as Float32Array;
    expect(Float32Array.from(item.feature.flat() as number[])).toEqual(rows);
  });

  it('sglang for Gemma 4: feature [tokens, width], no grid', async () => {
    const dir = join(tmp, 'sglang-g4');
    const r = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', join(FIXTURES, 'gemma4-tiny/model'), '--max-soft-tokens', '70', '--out-dir', dir, '--format', 'sglang');
    expect(r.code, r.stderr).toBe(0);
    const item = JSON.parse(readFileSync(at(dir, 'coffee.sglang.json'), 'utf8'));
    expect(Object.keys(item).sort()).toEqual(['feature', 'format']);
    const tower = await VisionTower.open(join(FIXTURES, 'gemma4-tiny/model'), { backend: 'cpu' });
    const mine = await tower.encode(join(IMAGES, 'coffee.png'), { maxSoftTokens: 70 });
    await tower.close();
    expect(item.feature).toHaveLength(mine.tokens);
    expect(Float32Array.from(item.feature.flat() as number[])).toEqual(mine.embeddings);
  });

  it('sglang numbers are the shortest decimals that read back to each float32 (never a longer one, never an int)', () => {
    const text = readFileSync(at(join(tmp, 'sglang'), 'coffee.sglang.json'), 'utf8');
    const numbers = text.slice(text.indexOf('"feature":')).match(/-?\d[\d.e+-]*/g)!;
    const rows = readNpy(Buffer.from(JSON.parse(readFileSync(at(join(tmp, 'vllm'), 'coffee.vllm.json'), 'utf8')).image_embeds.image_embeds, 'base64')).data as Float32Array;
    expect(numbers.slice(0, rows.length)).toHaveLength(rows.length);
    numbers.slice(0, rows.length).forEach((t, i) => {
      expect(Math.fround(Number(t)), t).toBe(rows[i]);
      expect(t, 'a float, as Python reads it').toMatch(/[.e]/);
      const d = significantDigits(t);
      if (d > 1) expect(Math.fround(Number(rows[i]!.toPrecision(d - 1))), `${t}: ${d - 1} digits also read back`).not.toBe(rows[i]);
    });
  });

  it('f32ToJson: shortest round-trip text for edge values and for 20,000 random float32s; NaN is refused', () => {
    expect(f32ToJson(Math.fround(0.1))).toBe('0.1');
    expect(f32ToJson(Math.fround(1 / 3))).toBe('0.33333334');
    expect(f32ToJson(1)).toBe('1.0');
    expect(f32ToJson(16777216)).toBe('16777216.0');
    expect(f32ToJson(0)).toBe('0.0');
    expect(f32ToJson(-0)).toBe('-0.0');
    expect(f32ToJson(Math.fround(1e-7))).toBe('1e-7');
    expect(f32ToJson(Math.fround(3.4028234663852886e38))).toBe('3.4028235e+38');
    expect(f32ToJson(Math.fround(1.401298464324817e-45))).toBe('1e-45');
    expect(() => f32ToJson(NaN)).toThrow(expect.objectContaining({ code: 'ERR_NUMERIC' }));
    const bits = new Uint32Array(20000);
    let x = 0x9e3779b9;
    for (let i = 0; i < bits.length; i++) bits[i] = x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + i) >>> 0;
    for (const v of new Float32Array(bits.buffer)) {
      if (!Number.isFinite(v)) continue;
      const t = f32ToJson(v);
      expect(Object.is(Math.fround(JSON.parse(t)), v), t).toBe(true);
      const d = significantDigits(t);
      if (d > 1) expect(Math.fround(Number(v.toPrecision(d - 1))), t).not.toBe(v);
    }
  });

  it('one SGLang item for a two-page request: the pages\' rows in order and both grids; rows of different towers are refused', async () => {
    const tower = await VisionTower.open(join(FIXTURES, 'qwen3_vl-tiny/model'), { backend: 'cpu' });
    const a = await tower.encode(join(IMAGES, 'coffee.png'), { maxPixels: 32768 });
    const b = await tower.encode(join(IMAGES, 'tiny.png'), { maxPixels: 32768 });
    await tower.close();
    const one = (r: typeof a) => JSON.parse(toSglangItemJson(r));
    const both = JSON.parse(toSglangItemJson([a, b]));
    expect(both.format).toBe('precomputed_embedding');
    expect(both.feature).toEqual([...one(a).feature, ...one(b).feature]);
    expect(both.image_grid_thw).toEqual([...one(a).image_grid_thw, ...one(b).image_grid_thw]);
    expect(both.feature).toHaveLength(a.tokens + b.tokens);
    const g4 = await VisionTower.open(join(FIXTURES, 'gemma4-tiny/model'), { backend: 'cpu' });
    const c = await g4.encode(join(IMAGES, 'coffee.png'), { maxSoftTokens: 70 });
    await g4.close();
    expect(() => toSglangItemJson([a, c])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringMatching(/result 1 has rows of 96 values, result 0 of 384/) }));
    expect(() => toSglangItemJson([])).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARGUMENT' }));
  });

  it('npy: one .npy per tensor (embeddings, grid_thw, deepstack.K, stage.NAME with --stages) and the record last', async () => {
    const dir = join(tmp, 'npy');
    const model = join(FIXTURES, 'qwen3_vl-tiny/model');
    const r = await tessera('encode', join(IMAGES, 'coffee.png'), '--model', model, '--max-pixels', '32768', '--out-dir', dir, '--format', 'npy', '--stages');
    expect(r.code, r.stderr).toBe(0);
    const names = readdirSync(at(dir, '')).filter((f) => f.startsWith('coffee.')).sort();
    expect(names).toEqual([
      'coffee.deepstack.0.npy', 'coffee.deepstack.1.npy', 'coffee.embeddings.npy', 'coffee.grid_thw.npy',
      'coffee.stage.block.0.npy', 'coffee.stage.block.1.npy', 'coffee.stage.block.2.npy', 'coffee.stage.block.3.npy',
      'coffee.stage.deepstack.0.npy', 'coffee.stage.deepstack.1.npy', 'coffee.stage.embed.npy', 'coffee.stage.merged.npy',
      'coffee.tessera.json',
    ]);
    const ref = readTensors(join(FIXTURES, 'qwen3_vl-tiny/expected/coffee.safetensors'));
    for (const [file, stage] of [['embeddings', 'merged'], ['deepstack.1', 'deepstack.1'], ['stage.block.3', 'block.3'], ['stage.embed', 'embed']] as const) {
      const t = readNpy(readFileSync(at(dir, `coffee.${file}.npy`)));
      expect(t.shape, file).toEqual(ref[stage]!.shape);
      expect(relErr(t.data as Float32Array, ref[stage]!.f32()), file).toBeLessThan(1e-4);
    }
    expect(Array.from(readNpy(readFileSync(at(dir, 'coffee.grid_thw.npy'))).data as BigInt64Array, Number)).toEqual([1, 8, 12]);
  });
});

describe('bulk flags', () => {
  it('usage errors exit 2 before any work, naming the flag', async () => {
    const img = join(IMAGES, 'tiny.png');
    const model = join(FIXTURES, 'qwen3_vl-tiny/model');
    const cases: [string[], RegExp][] = [
      [[img, '--out', join(tmp, 'a.safetensors'), '--out-dir', join(tmp, 'x')], /--out-dir cannot be given with --out/],
      [[img, '--format', 'npy'], /--format 'npy' needs --out-dir/],
      [[img, '--force'], /--force needs --out-dir/],
      [[img, '--out-dir', join(tmp, 'x'), '--format', 'parquet'], /--format .*safetensors.*npy.*vllm.*sglang/],
      [[join(tmp, 'empty-folder')], /no images found/],
    ];
    const { mkdirSync } = await import('node:fs');
    mkdirSync(join(tmp, 'empty-folder'), { recursive: true });
    for (const [args, message] of cases) {
      const r = await tessera('encode', ...args, '--model', model);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
  });

  it('two inputs that would write the same output (page.png, page.jpg) are refused, naming both', async () => {
    const dir = join(tmp, 'clash');
    const { mkdirSync, copyFileSync } = await import('node:fs');
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(IMAGES, 'tiny.png'), join(dir, 'page.png'));
    copyFileSync(join(IMAGES, 'chelsea_exif6.jpg'), join(dir, 'page.jpg'));
    const r = await tessera('encode', dir, '--model', join(FIXTURES, 'qwen3_vl-tiny/model'), '--out-dir', join(tmp, 'clash-out'));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/page\.jpg and .*page\.png would both be written as page\.\*/);
  });
});
