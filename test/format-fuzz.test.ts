// Seeded fuzzing of every parser a model file goes through: safetensors headers, GGUF headers,
// HF config.json / preprocessor_config.json, and the pack manifest. Each test runs a fixed number
// of mutants from a fixed seed (the same cases every run, a few seconds each); the property is the
// one of test/helpers/fuzz.ts: a model that loads, or a TesseraError with a known code (never
// another exception, never ERR_INTERNAL, never a hang). A failure names its seed and case number.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ggufTensorDType, readGgufHeader } from '../src/formats/gguf.js';
import { readSafetensorsHeader } from '../src/formats/safetensors.js';
import { addon } from '../src/native.js';
import { VisionTower } from '../src/index.js';
import { packModel } from '../src/pack/index.js';
import { makePreprocessor } from '../src/prepare.js';
import { loadModel } from '../src/load-model.js';
import { FIXTURES } from './helpers/fixtures.js';
import { OutcomeTally, Rng, fuzzCases, mutate, mutateJsonText, outcomeOf } from './helpers/fuzz.js';
import { copyModel } from './helpers/model-copy.js';

const QWEN35 = join(FIXTURES, 'qwen3_5-tiny', 'model');
const GEMMA4 = join(FIXTURES, 'gemma4-tiny', 'model');
const MMPROJ = join(FIXTURES, 'gemma4-tiny', 'mmproj-gemma4v-f16.gguf');
const Q8_MMPROJ = join(FIXTURES, 'qwen3_5-tiny', 'mmproj', 'mmproj-q8_0.gguf');
const SHARD = 'model-00001-of-00002.safetensors';

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'tessera-format-fuzz-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Loads a model folder or file as open() does up to the addon: the spec and the preprocessor. */
async function load(path: string): Promise<void> {
  const m = await loadModel(path);
  if (m.preprocessorConfig !== undefined || m.spec.family === 'gemma4') makePreprocessor(m.spec.family, m.preprocessorConfig, path, m.spec.dims);
}

describe('safetensors header fuzz', () => {
  it('400 mutants of a shard (bytes of the length and header, or its JSON text): loaded or refused with a code', async () => {
    const dir = copyModel(QWEN35);
    const shard = join(dir, SHARD);
    const original = readFileSync(join(QWEN35, SHARD));
    const headerLen = Number(original.readBigUInt64LE(0));
    const header = original.subarray(0, 8 + headerLen);
    const data = original.subarray(8 + headerLen);
    const text = header.subarray(8).toString('utf8');
    const rng = new Rng(0x5afe7e45);
    const tally = new OutcomeTally();
    for (let i = 0; i < fuzzCases(400); i++) {
      let bytes: Buffer;
      if (i % 2 === 0) {
        bytes = Buffer.concat([mutate(header, rng), data]);
      } else {
        // Structure-aware: edited JSON with a length prefix that matches it.
        const t = Buffer.from(mutateJsonText(text, rng), 'utf8');
        const len = Buffer.alloc(8);
        len.writeBigUInt64LE(BigInt(t.length));
        bytes = Buffer.concat([len, t, data]);
      }
      writeFileSync(shard, bytes);
      const what = `seed 0x5afe7e45 case ${i}`;
      tally.add(await outcomeOf(what, () => readSafetensorsHeader(shard)));
      // The whole folder (index, both shards, spec builder) for a quarter of them.
      if (i % 4 === 1) tally.add(await outcomeOf(`${what} (folder)`, () => load(dir)));
    }
    expect(tally.get('ERR_WEIGHTS_CORRUPT'), String(tally)).toBeGreaterThan(50);
    expect(tally.get('ok'), String(tally)).toBeGreaterThan(20);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('GGUF header fuzz', () => {
  it('400 mutants of the mmproj header (metadata and tensor infos; the data kept): loaded or refused with a code', async () => {
    const original = readFileSync(MMPROJ);
    const dataStart = 8256; // the fixture's data section starts here (asserted in format-gguf.test.ts)
    const header = original.subarray(0, dataStart);
    const data = original.subarray(dataStart);
    const path = join(scratch, 'fuzz.gguf');
    const rng = new Rng(0x6d6d7072);
    const tally = new OutcomeTally();
    for (let i = 0; i < fuzzCases(400); i++) {
      // Most mutants keep the magic and version (bytes 0..8) so the parser gets past them.
      const bytes = Buffer.concat([mutate(header, rng, { from: i % 8 === 0 ? 0 : 8 }), data]);
      writeFileSync(path, bytes);
      tally.add(await outcomeOf(`seed 0x6d6d7072 case ${i}`, () => load(path)));
    }
    expect(tally.get('ERR_WEIGHTS_CORRUPT'), String(tally)).toBeGreaterThan(50);
    expect(tally.refused, String(tally)).toBeGreaterThan(200);
  });
});

describe('Qwen mmproj header fuzz', () => {
  // The Qwen builders' keys: Qwen2.5-VL's use_silu (bool) and n_wa_pattern, Qwen3.5's is_deepstack_layers (bool
  // array) and spatial_merge_size, and the tensor infos the sizes are read from.
  for (const [fixture, seed] of [['qwen2_5_vl-tiny', 0x25f], ['qwen3_5-tiny', 0x35f]] as const) {
    it(`${fixture}: 200 mutants of the f16 mmproj header, loaded (spec and processor) or refused with a code`, async () => {
      const src = join(FIXTURES, fixture, 'mmproj', 'mmproj-f16.gguf');
      const original = readFileSync(src);
      const h = await readGgufHeader(src);
      const header = original.subarray(0, h.dataOffset);
      const path = join(scratch, `fuzz-${fixture}.gguf`);
      const rng = new Rng(seed);
      const tally = new OutcomeTally();
      for (let i = 0; i < fuzzCases(200); i++) {
        writeFileSync(path, Buffer.concat([mutate(header, rng, { from: 8 }), original.subarray(h.dataOffset)]));
        tally.add(await outcomeOf(`seed 0x${seed.toString(16)} case ${i}`, () => load(path)));
      }
      expect(tally.refused, String(tally)).toBeGreaterThan(50);
    });
  }
});

describe('GGUF Q8_0 fuzz', () => {
  it("300 mutants of llama.cpp's Q8_0 mmproj (header bytes, and Q8_0 blocks widened): read or refused with a code", async () => {
    const original = readFileSync(Q8_MMPROJ);
    const h = await readGgufHeader(Q8_MMPROJ);
    const header = original.subarray(0, h.dataOffset);
    const path = join(scratch, 'fuzz-q8.gguf');
    const rng = new Rng(0x0880);
    const tally = new OutcomeTally();
    for (let i = 0; i < fuzzCases(300); i++) {
      // Half mutate the header (metadata, tensor infos), half the data (scales and quants can be anything).
      const bytes = i % 2 === 0 ? Buffer.concat([mutate(header, rng, { from: 8 }), original.subarray(h.dataOffset)]) : mutate(original, rng, { from: h.dataOffset, kinds: ['flip', 'byte'] });
      writeFileSync(path, bytes);
      tally.add(
        await outcomeOf(`seed 0x0880 case ${i}`, async () => {
          const m = await readGgufHeader(path);
          for (const t of m.tensors.values()) {
            if (ggufTensorDType(m, t) !== 'q8_0') continue;
            addon().convertDtype(new Uint8Array(bytes.buffer, bytes.byteOffset + t.offset, t.length), 'q8_0', 'f32');
          }
        }),
      );
    }
    expect(tally.get('ok'), String(tally)).toBeGreaterThan(100);
    expect(tally.refused, String(tally)).toBeGreaterThan(20);
  });
});

describe('HF config fuzz', () => {
  for (const [family, model, seed] of [
    ['qwen3_5', QWEN35, 0xc0f19],
    ['gemma4', GEMMA4, 0x9e44],
  ] as const) {
    it(`${family}: 150 mutants each of config.json and preprocessor_config.json, opened: a tower or a code`, async () => {
      const dir = copyModel(model);
      const tally = new OutcomeTally();
      const rng = new Rng(seed);
      for (const file of ['config.json', 'preprocessor_config.json']) {
        const original = readFileSync(join(model, file), 'utf8');
        for (let i = 0; i < fuzzCases(150); i++) {
          writeFileSync(join(dir, file), mutateJsonText(original, rng));
          // Through open(): the spec, the preprocessor's checks against it, and the addon's own.
          const o = await outcomeOf(`${family} ${file} seed 0x${seed.toString(16)} case ${i}`, async () => {
            const t = await VisionTower.open(dir, { backend: 'cpu', residency: 'mapped' });
            await t.close();
          });
          tally.add(o);
        }
        writeFileSync(join(dir, file), original);
      }
      expect(tally.get('ERR_CONFIG_INVALID'), String(tally)).toBeGreaterThan(20);
      expect(tally.get('ok'), String(tally)).toBeGreaterThan(20);
      rmSync(dir, { recursive: true, force: true });
    });
  }
});

describe('pack manifest fuzz', () => {
  it('200 mutants of tessera-pack.json: loaded or refused with a code', async () => {
    const packed = join(scratch, 'packed');
    await packModel(await loadModel(QWEN35), packed);
    const manifest = join(packed, 'tessera-pack.json');
    const original = readFileSync(manifest, 'utf8');
    copyFileSync(manifest, join(scratch, 'manifest.orig'));
    const rng = new Rng(0x7ac4);
    const tally = new OutcomeTally();
    for (let i = 0; i < fuzzCases(200); i++) {
      writeFileSync(manifest, mutateJsonText(original, rng));
      tally.add(await outcomeOf(`seed 0x7ac4 case ${i}`, () => load(packed)));
    }
    expect(tally.refused, String(tally)).toBeGreaterThan(50);
  });
});
