// Every model-loading failure (missing files, bad configs, missing or misshapen tensors, corrupt weights) gets its code and a message naming the culprit.
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TesseraError, VisionTower } from '../src/index.js';
import { FIXTURES } from './helpers/fixtures.js';
import { copyModel, editConfig, readRaw, writeRaw } from './helpers/model-copy.js';

const VL = join(FIXTURES, 'qwen3_vl-tiny', 'model');

async function openError(path: string, options = {}): Promise<TesseraError> {
  try {
    const t = await VisionTower.open(path, { backend: 'cpu', ...options });
    await t.close();
  } catch (e) {
    expect(e).toBeInstanceOf(TesseraError);
    return e as TesseraError;
  }
  throw new Error('open succeeded');
}

function withModel(fn: (dir: string) => void): string {
  const dir = copyModel(VL);
  fn(dir);
  return dir;
}

describe('model loading errors', () => {
  it('a missing path is ERR_MODEL_NOT_FOUND', async () => {
    const e = await openError('/nonexistent/tessera-model');
    expect(e.code).toBe('ERR_MODEL_NOT_FOUND');
    expect(e.message).toContain('/nonexistent/tessera-model');
  });

  it('a folder without config.json is ERR_MODEL_NOT_FOUND', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-empty-'));
    const e = await openError(dir);
    expect(e.code).toBe('ERR_MODEL_NOT_FOUND');
    expect(e.message).toContain('config.json');
    rmSync(dir, { recursive: true });
  });

  it('a folder without weights is ERR_MODEL_NOT_FOUND', async () => {
    const dir = withModel((d) => unlinkSync(join(d, 'model.safetensors')));
    const e = await openError(dir);
    expect(e.code).toBe('ERR_MODEL_NOT_FOUND');
    expect(e.message).toContain('safetensors');
  });

  it('a shard index that gives a tensor a file outside the folder is ERR_WEIGHTS_CORRUPT naming the tensor', async () => {
    const dir = withModel((d) =>
      writeFileSync(join(d, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'model.visual.merger.norm.weight': 'model.safetensors', 'model.visual.blocks.0.attn.qkv.weight': '../../etc/x.safetensors' } })),
    );
    const e = await openError(dir);
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toContain("tensor 'model.visual.blocks.0.attn.qkv.weight'");
    expect(e.message).toContain('../../etc/x.safetensors');
  });

  it('an unknown model_type is ERR_MODEL_FORMAT naming it', async () => {
    const dir = withModel((d) => editConfig(d, (c) => (c.model_type = 'llava')));
    const e = await openError(dir);
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toContain('llava');
  });

  it('a file that is not GGUF is ERR_MODEL_FORMAT', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tessera-file-'));
    writeFileSync(join(dir, 'x.bin'), 'hello world');
    expect((await openError(join(dir, 'x.bin'))).code).toBe('ERR_MODEL_FORMAT');
  });

  it('an invalid config field is ERR_CONFIG_INVALID naming the field and why', async () => {
    const dir = withModel((d) => editConfig(d, (c) => (c.vision_config.depth = -3)));
    const e = await openError(dir);
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toContain('depth');
    const dir2 = withModel((d) => editConfig(d, (c) => (c.vision_config.hidden_size = 'big')));
    const e2 = await openError(dir2);
    expect(e2.code).toBe('ERR_CONFIG_INVALID');
    expect(e2.message).toContain('hidden_size');
  });

  it('a config that is not JSON is ERR_CONFIG_INVALID', async () => {
    const dir = withModel((d) => writeFileSync(join(d, 'config.json'), '{ nope'));
    expect((await openError(dir)).code).toBe('ERR_CONFIG_INVALID');
  });

  it('out_hidden_size disagreeing with the text model is ERR_CONFIG_INVALID', async () => {
    const dir = withModel((d) => editConfig(d, (c) => (c.text_config.hidden_size = 999)));
    const e = await openError(dir);
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toContain('out_hidden_size');
  });

  it('a missing tower tensor is ERR_TENSOR_MISSING naming it', async () => {
    const dir = withModel((d) => {
      const f = join(d, 'model.safetensors');
      const { header, data } = readRaw(f);
      delete header['model.visual.blocks.2.attn.proj.weight'];
      writeRaw(f, header, data);
    });
    const e = await openError(dir);
    expect(e.code).toBe('ERR_TENSOR_MISSING');
    expect(e.message).toContain('model.visual.blocks.2.attn.proj.weight');
  });

  it('a tensor of the wrong shape is ERR_TENSOR_SHAPE naming it, expected and found', async () => {
    const dir = withModel((d) => {
      const f = join(d, 'model.safetensors');
      const { header, data } = readRaw(f);
      const t = header['model.visual.blocks.1.norm1.weight'];
      t.shape = [t.shape[0] / 2, 2];
      writeRaw(f, header, data);
    });
    const e = await openError(dir);
    expect(e.code).toBe('ERR_TENSOR_SHAPE');
    expect(e.message).toContain('model.visual.blocks.1.norm1.weight');
    expect(e.message).toContain('[72, 2]');
    expect(e.message).toContain('[144]');
  });

  describe('corrupt safetensors is ERR_WEIGHTS_CORRUPT', () => {
    const corrupt = (edit: (f: string) => void) => withModel((d) => edit(join(d, 'model.safetensors')));
    it('header length past the end', async () => {
      const dir = corrupt((f) => {
        const { header, data } = readRaw(f);
        writeRaw(f, header, data, 1n << 40n);
      });
      const e = await openError(dir);
      expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
      expect(e.message).toContain('header length');
    });
    it('offsets past the end', async () => {
      const dir = corrupt((f) => {
        const { header, data } = readRaw(f);
        writeRaw(f, header, data.subarray(0, data.length - 100));
      });
      const e = await openError(dir);
      expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
      expect(e.message).toMatch(/outside the .*data section/);
    });
    it('overlapping ranges', async () => {
      const dir = corrupt((f) => {
        const { header, data } = readRaw(f);
        const a = header['model.visual.blocks.0.norm1.weight'];
        const b = header['model.visual.blocks.0.norm1.bias'];
        b.data_offsets = [a.data_offsets[0], a.data_offsets[1]];
        b.dtype = a.dtype;
        b.shape = a.shape;
        writeRaw(f, header, data);
      });
      const e = await openError(dir);
      expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
      expect(e.message).toContain('overlap');
    });
    it('bad JSON', async () => {
      const dir = corrupt((f) => {
        const { data } = readRaw(f);
        writeRaw(f, '{"a": [1, 2', data);
      });
      const e = await openError(dir);
      expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
      expect(e.message).toContain('JSON');
    });
    it('a file too short for a header', async () => {
      const dir = corrupt((f) => writeFileSync(f, Buffer.from([1, 2, 3])));
      expect((await openError(dir)).code).toBe('ERR_WEIGHTS_CORRUPT');
    });
  });

  it('bad open options are ERR_INVALID_ARGUMENT naming the option', async () => {
    const e = await openError(VL, { residency: 'cloud' });
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toContain('residency');
  });
});
