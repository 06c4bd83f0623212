// --out-dir formats (src/bulk/): what `tessera encode --out-dir --format F` writes per image, read
// back independently of the writer. vllm: the content part, its image_embeds a base64 .npy of
// [tokens, (1 + deepstack) x width] f32 with the merged rows first and each deepstack level after,
// equal to HF's reference stages laid out that way (and numpy reads it, where numpy is installed);
// sglang: the precomputed_embedding item; npy: one file per tensor; Gemma 4 is refused for vllm
// (vLLM takes no Gemma 4 image embeddings) and written for sglang.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../src/cli/main.js';
import type { CliIo } from '../src/cli/io.js';
import { VisionTower } from '../src/index.js';
import { FIXTURES, readTensors, relErr } from './helpers/fixtures.js';
import { readNpy } from './helpers/npy.js';

const IMAGES = join(FIXTURES, 'images');
let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'tessera-formats-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function tessera(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), progress: () => undefined, tty: false, columns: 80 };
  const code = await run(args, io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

/** Where --out-dir puts an output for a fixture image named by its path: its path relative to the current folder. */
const at = (dir: string, name: string) => join(dir, relative(process.cwd(), IMAGES), name);

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
  it('Qwen3-VL: image_embeds [tokens, 3 x 128] = merged, deepstack.0, deepstack.1 per row (HF reference), image_grid_thw [1, 3] int64', async () => {
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
    expect(grid.shape).toEqual([1, 3]);
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
    expect(rec.record).toMatchObject({ format: 'vllm', family: 'qwen3_vl', tokens: '24', input: relative(process.cwd(), join(IMAGES, 'coffee.png')) });
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
    expect([shape, dtype, gshape, gdtype, g]).toEqual([[24, 384], 'float32', [1, 3], 'int64', [[1, 8, 12]]]);
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
