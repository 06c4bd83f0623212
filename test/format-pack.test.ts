// tessera pack: a packed folder opens like any other model and gives bit-identical outputs (every
// residency), blocks listed out of order are placed by their own index, --dtype converts the
// matrices, and every manifest refusal carries its code.
import { mkdtempSync, readFileSync, rmSync, writeFileSync, truncateSync, openSync, readSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError, VisionTower } from '../src/index.js';
import { loadModel } from '../src/spec/load.js';
import { MANIFEST_FILE, PACK_ALIGNMENT, packCommand, packModel, parseManifest, planPack, specFromManifest, type PackManifest } from '../src/pack/index.js';
import { FIXTURES, gemmaInput, qwenInput, readTensors, relErr } from './helpers/fixtures.js';
import { GEMMA4_MMPROJ } from './helpers/gemma4-fixtures.js';

const tmp = mkdtempSync(join(tmpdir(), 'tessera-pack-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

type Input = Parameters<VisionTower['encodePixels']>[0];

async function run(path: string, input: Input, opts: Parameters<typeof VisionTower.open>[1] = {}) {
  const tower = await VisionTower.open(path, { backend: 'cpu', ...opts });
  try {
    return { info: tower.info, result: await tower.encodePixels(input, { stages: true }), stats: tower.stats() };
  } finally {
    await tower.close();
  }
}

function expectIdentical(a: Awaited<ReturnType<VisionTower['encodePixels']>>, b: typeof a, label: string) {
  expect(Object.keys(a.stages!)).toEqual(Object.keys(b.stages!));
  for (const [name, data] of Object.entries(a.stages!))
    expect(Buffer.from(b.stages![name]!.buffer).equals(Buffer.from(data.buffer)), `${label}: stage ${name}`).toBe(true);
  for (const [k, ds] of (a.deepstack ?? []).entries())
    expect(Buffer.from(b.deepstack![k]!.buffer).equals(Buffer.from(ds.buffer)), `${label}: deepstack ${k}`).toBe(true);
}

const sources = [
  { label: 'qwen3_5-tiny (sharded bf16 folder)', path: join(FIXTURES, 'qwen3_5-tiny', 'model'), input: () => qwenInput('qwen3_5-tiny', 'coffee') },
  { label: 'qwen3_vl-tiny (f16, deepstack)', path: join(FIXTURES, 'qwen3_vl-tiny', 'model'), input: () => qwenInput('qwen3_vl-tiny', 'tiny') },
  { label: 'gemma4-tiny (mmproj GGUF)', path: GEMMA4_MMPROJ, input: () => gemmaInput('tiny') },
];

describe('packed folders', () => {
  for (const [i, s] of sources.entries())
    it(`${s.label}: packs, opens as 'packed', and equals the original bit for bit under every residency`, async () => {
      const out = join(tmp, `p${i}`);
      const res = await packModel(s.path, out);
      expect(res.bytes % PACK_ALIGNMENT).toBe(0);
      const manifest = parseManifest(readFileSync(join(out, MANIFEST_FILE), 'utf8'), 'm');
      for (const b of manifest.blocks.entries) expect(b.offset % PACK_ALIGNMENT).toBe(0);
      const input = s.input();
      const original = await run(s.path, input, { residency: 'resident' });
      for (const opts of [{ residency: 'resident' as const }, { residency: 'mapped' as const }, { residency: 'stream' as const, slots: 2 }]) {
        const packed = await run(out, input, opts);
        expect(packed.info.source).toBe('packed');
        expect(packed.info.depth).toBe(original.info.depth);
        expectIdentical(original.result, packed.result, `${s.label} ${opts.residency}`);
        // A packed stage is one contiguous range: one pread per stage (K = 2 keeps none between passes).
        if (opts.residency !== 'mapped') expect(packed.stats.reads, opts.residency).toBe(manifest.blocks.entries.length + manifest.stages.length);
      }
    });

  it('blocks listed out of order, even stored out of order, are placed by their own index', async () => {
    const src = join(FIXTURES, 'qwen3_vl-tiny', 'model');
    const out = join(tmp, 'shuffled');
    await packModel(src, out);
    const mpath = join(out, MANIFEST_FILE);
    const m = JSON.parse(readFileSync(mpath, 'utf8')) as PackManifest;
    // Swap the bytes of blocks 0 and 2 in the file, swap their offsets, and list blocks backwards.
    const e0 = m.blocks.entries.find((b) => b.index === 0)!, e2 = m.blocks.entries.find((b) => b.index === 2)!;
    const fd = openSync(join(out, m.weights), 'r+');
    const a = Buffer.alloc(m.blocks.stride), b = Buffer.alloc(m.blocks.stride);
    readSync(fd, a, 0, a.length, e0.offset);
    readSync(fd, b, 0, b.length, e2.offset);
    writeSync(fd, b, 0, b.length, e0.offset);
    writeSync(fd, a, 0, a.length, e2.offset);
    closeSync(fd);
    [e0.offset, e2.offset] = [e2.offset, e0.offset];
    m.blocks.entries.reverse();
    writeFileSync(mpath, JSON.stringify(m));
    const input = qwenInput('qwen3_vl-tiny', 'tiny');
    const original = await run(src, input);
    expectIdentical(original.result, (await run(out, input, { residency: 'stream', slots: 2 })).result, 'shuffled');
  });

  it('--dtype f32 converts the matrices (vectors keep theirs) and stays within 1e-4 of HF', async () => {
    const out = join(tmp, 'f32');
    await packModel(join(FIXTURES, 'qwen3_5-tiny', 'model'), out, { dtype: 'f32' });
    const m = parseManifest(readFileSync(join(out, MANIFEST_FILE), 'utf8'), 'm');
    const all = [...m.stages.flatMap((s) => s.tensors), ...m.blocks.entries.flatMap((b) => b.tensors)];
    for (const t of all) expect(t.dtype, t.name).toBe(t.shape.length >= 2 ? 'f32' : 'bf16');
    const ref = readTensors(join(FIXTURES, 'qwen3_5-tiny', 'expected', 'coffee.safetensors'));
    const { result } = await run(out, qwenInput('qwen3_5-tiny', 'coffee'));
    for (const name of Object.keys(ref).filter((k) => k !== 'pixel_values' && k !== 'image_grid_thw'))
      expect(relErr(result.stages![name]!, ref[name]!.f32()), name).toBeLessThan(1e-4);
  });

  it('refuses a non-empty output folder and an unknown dtype', async () => {
    const src = join(FIXTURES, 'qwen3_5-tiny', 'model');
    await expect(packModel(src, join(tmp, 'p0'))).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    await expect(packModel(src, join(tmp, 'x'), { dtype: 'q4' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    const file = join(tmp, 'a-file');
    writeFileSync(file, 'x');
    await expect(packModel(src, file)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringContaining(file) });
    await expect(packModel(src, join(file, 'below'))).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});

describe('packed manifest refusals', () => {
  let base: PackManifest;
  let fileBytes: number;
  beforeAll(async () => {
    const model = await loadModel(join(FIXTURES, 'qwen3_vl-tiny', 'model'));
    base = planPack(model.spec, { path: 'src', dtype: undefined }, undefined);
    fileBytes = base.weightsBytes;
  });
  const clone = () => JSON.parse(JSON.stringify(base)) as PackManifest;
  function refusal(m: PackManifest, bytes = fileBytes): TesseraError {
    try {
      specFromManifest(m, '/x/weights.bin', bytes, 'tessera-pack.json');
    } catch (e) {
      expect(e).toBeInstanceOf(TesseraError);
      return e as TesseraError;
    }
    throw new Error('expected a refusal');
  }

  it('accepts the plan as written, stages in execution order', () => {
    const spec = specFromManifest(clone(), '/x/weights.bin', fileBytes, 'm');
    expect(spec.source).toBe('packed');
    const names = spec.stages.map((s) => s.name);
    expect(names[0]).toBe('embed');
    expect(spec.stages.at(-1)!.kind).toBe('merger');
    // qwen3_vl-tiny: deepstack mergers after blocks 1 and 2.
    expect(names.indexOf('deepstack.0')).toBe(names.indexOf('block.1') + 1);
    expect(names.indexOf('deepstack.1')).toBe(names.indexOf('block.2') + 1);
  });

  it('a block count that disagrees with the depth: ERR_CONFIG_INVALID', () => {
    const m = clone();
    m.blocks.count = base.blocks.count - 1;
    expect(refusal(m)).toMatchObject({ code: 'ERR_CONFIG_INVALID', message: expect.stringMatching(/holds 3 blocks but the config's depth is 4/) });
  });

  it('a block out of range: ERR_WEIGHTS_CORRUPT', () => {
    const m = clone();
    m.blocks.entries[1]!.index = 4;
    expect(refusal(m)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/block 4 is out of range/) });
  });

  it('a duplicated block: ERR_WEIGHTS_CORRUPT', () => {
    const m = clone();
    m.blocks.entries[2]!.index = 1;
    expect(refusal(m)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/block 1 is listed twice/) });
  });

  it('a missing block: ERR_TENSOR_MISSING', () => {
    const m = clone();
    m.blocks.entries.splice(2, 1);
    expect(refusal(m)).toMatchObject({ code: 'ERR_TENSOR_MISSING', message: expect.stringMatching(/block 2 is missing/) });
  });

  it('a stride that disagrees with the tensors: ERR_WEIGHTS_CORRUPT (both ways)', () => {
    const small = clone();
    small.blocks.stride -= PACK_ALIGNMENT;
    expect(refusal(small).code).toBe('ERR_WEIGHTS_CORRUPT');
    const big = clone();
    big.blocks.stride += PACK_ALIGNMENT;
    expect(refusal(big)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/stride .* disagrees with the tensors/) });
  });

  it('stages past the end, misaligned or overlapping: ERR_WEIGHTS_CORRUPT', () => {
    const past = clone();
    past.blocks.entries[3]!.offset = fileBytes;
    expect(refusal(past)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/past the end/) });
    const misaligned = clone();
    misaligned.stages[0]!.offset += 64;
    expect(refusal(misaligned)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/not a multiple of 16384/) });
    const overlap = clone();
    overlap.blocks.entries[1]!.offset = overlap.blocks.entries[0]!.offset;
    expect(refusal(overlap)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/overlap/) });
  });

  it('a weights file of another size (truncated): ERR_WEIGHTS_CORRUPT', () => {
    expect(refusal(clone(), fileBytes - 1)).toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT', message: expect.stringMatching(/truncated/) });
  });

  it('a tensor whose length disagrees with its shape: ERR_TENSOR_SHAPE', () => {
    const m = clone();
    m.blocks.entries[0]!.tensors[0]!.shape = [7];
    expect(refusal(m).code).toBe('ERR_TENSOR_SHAPE');
  });

  it('bad JSON, another version, a bad field', () => {
    const code = (text: string) => {
      try {
        parseManifest(text, 'tessera-pack.json');
      } catch (e) {
        return (e as TesseraError).code;
      }
      return 'none';
    };
    expect(code('{"format": ')).toBe('ERR_WEIGHTS_CORRUPT');
    expect(code(JSON.stringify({ ...base, version: 99 }))).toBe('ERR_MODEL_FORMAT');
    expect(code(JSON.stringify({ ...base, format: 'other' }))).toBe('ERR_MODEL_FORMAT');
    expect(code(JSON.stringify({ ...base, alignment: 4096 }))).toBe('ERR_CONFIG_INVALID');
    expect(() => parseManifest(JSON.stringify({ ...base, weights: '../etc/passwd' }), 'm')).toThrow(/weights/);
  });

  it('through the files: a truncated weights file or a missing one is refused at open', async () => {
    const out = join(tmp, 'trunc');
    await packModel(join(FIXTURES, 'qwen3_5-tiny', 'model'), out);
    const m = parseManifest(readFileSync(join(out, MANIFEST_FILE), 'utf8'), 'm');
    truncateSync(join(out, m.weights), m.weightsBytes - PACK_ALIGNMENT);
    await expect(VisionTower.open(out, { backend: 'cpu' })).rejects.toMatchObject({ code: 'ERR_WEIGHTS_CORRUPT' });
    rmSync(join(out, m.weights));
    await expect(VisionTower.open(out, { backend: 'cpu' })).rejects.toMatchObject({ code: 'ERR_MODEL_NOT_FOUND' });
  });
});

describe('stage checksums (verify)', () => {
  const src = join(FIXTURES, 'qwen3_5-tiny', 'model');
  /** Zeroes `length` bytes of the weights file in place at the start of `stage` (no truncation, same inode). */
  function zeroStage(dir: string, stage: string, length = 256) {
    const m = JSON.parse(readFileSync(join(dir, MANIFEST_FILE), 'utf8')) as PackManifest;
    const at = stage.startsWith('block.') ? m.blocks.entries.find((b) => `block.${b.index}` === stage)!.offset : m.stages.find((s) => s.name === stage)!.offset;
    const fd = openSync(join(dir, m.weights), 'r+');
    writeSync(fd, Buffer.alloc(length), 0, length, at);
    closeSync(fd);
  }

  it('pack records a SHA-256 per stage; open with verify: true accepts the folder as packed and names a stage changed since', async () => {
    const out = join(tmp, 'verified');
    await packModel(src, out);
    const m = parseManifest(readFileSync(join(out, MANIFEST_FILE), 'utf8'), 'm');
    for (const s of [...m.blocks.entries, ...m.stages]) expect(s.sha256).toMatch(/^[0-9a-f]{64}$/);
    await (await VisionTower.open(out, { backend: 'cpu', verify: true })).close();
    zeroStage(out, 'block.1');
    const e = await VisionTower.open(out, { backend: 'cpu', verify: true }).then(
      () => undefined,
      (err: TesseraError) => err,
    );
    expect(e?.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e?.message).toMatch(/stage 'block\.1' .* does not match its checksum/);
    // Without verify the same folder opens (the bytes are only read as stages run).
    await (await VisionTower.open(out, { backend: 'cpu' })).close();
  });

  it('tower.verify(): weights zeroed under an open mapped or stream tower are detected; other sources are refused', async () => {
    for (const residency of ['mapped', 'stream'] as const) {
      const out = join(tmp, `verify-${residency}`);
      await packModel(src, out);
      const tower = await VisionTower.open(out, { backend: 'cpu', residency });
      try {
        await tower.verify();
        zeroStage(out, 'merged');
        const e = await tower.verify().then(() => undefined, (err: TesseraError) => err);
        expect(e?.code, residency).toBe('ERR_WEIGHTS_CORRUPT');
        expect(e?.message, residency).toMatch(/stage 'merged'/);
      } finally {
        await tower.close();
      }
    }
    const hf = await VisionTower.open(src, { backend: 'cpu' });
    try {
      await expect(hf.verify()).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
    } finally {
      await hf.close();
    }
    await expect(VisionTower.open(src, { backend: 'cpu', verify: true })).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT', message: expect.stringMatching(/verify is for packed folders/) });
  });
});

describe('tessera pack (command)', () => {
  it('packs with --dtype, and answers usage errors with exit code 2 and the usage line', async () => {
    const out: string[] = [], err: string[] = [];
    const run = (args: string[]) => packCommand(args, (l) => out.push(l), (l) => err.push(l));
    expect(await run([join(FIXTURES, 'qwen3_5-tiny', 'model'), join(tmp, 'cli'), '--dtype', 'f16'])).toBe(0);
    expect(out.join('\n')).toMatch(/packed .* stages/);
    const m = parseManifest(readFileSync(join(tmp, 'cli', MANIFEST_FILE), 'utf8'), 'm');
    expect(m.packedFrom.dtype).toBe('f16');
    expect(await run([join(FIXTURES, 'qwen3_5-tiny', 'model')])).toBe(2);
    expect(await run(['a', 'b', '--dtype', 'q8'])).toBe(2);
    expect(await run(['a', 'b', '--fast'])).toBe(2);
    expect(await run([join(tmp, 'missing-model'), join(tmp, 'cli2')])).toBe(2);
    expect(err.join('\n')).toMatch(/usage: tessera pack/);
    expect(err.join('\n')).toMatch(/ERR_MODEL_NOT_FOUND/);
  });
});
