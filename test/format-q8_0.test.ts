// Q8_0 tensors of llama.cpp's own mmproj files (test/fixtures/<family>-tiny/mmproj/, made by its
// converter): the GGUF reader gives them dtype q8_0 and their block size, and widening them (the
// native conversion every weight store uses, through the addon's convertDtype) equals gguf-py's
// `dequantize` bit for bit (q8_0-dequant.json beside each file). The stores' own use of it is
// table-tested in test/native/test_io_q8.cc.
import { createHash } from 'node:crypto';
import { openSync, readFileSync, readSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ggufTensorDType, ggufTensorIndex, readGgufHeader } from '../src/formats/gguf.js';
import { storedBytes } from '../src/formats/tensor-index.js';
import { addon } from '../src/native.js';
import { FIXTURES } from './helpers/fixtures.js';

const FAMILIES = ['qwen2_vl-tiny', 'qwen2_5_vl-tiny', 'qwen3_vl-tiny', 'qwen3_5-tiny'];

interface Reference {
  tensors: Record<string, { shape: number[]; sha256: string; first8: number[] }>;
}

describe.each(FAMILIES)('%s: mmproj-q8_0.gguf', (family) => {
  const dir = join(FIXTURES, family, 'mmproj');
  const ref = JSON.parse(readFileSync(join(dir, 'q8_0-dequant.json'), 'utf8')) as Reference;

  it("every Q8_0 tensor widens to gguf-py's dequantised values, bit for bit", async () => {
    const path = join(dir, 'mmproj-q8_0.gguf');
    const h = await readGgufHeader(path);
    const index = ggufTensorIndex(h);
    const q8 = [...h.tensors.values()].filter((t) => t.typeName === 'Q8_0').map((t) => t.name);
    expect(q8.length).toBeGreaterThan(0);
    expect(q8.sort()).toEqual(Object.keys(ref.tensors).sort()); // no Q8_0 tensor unchecked
    const fd = openSync(path, 'r');
    try {
      for (const [name, want] of Object.entries(ref.tensors)) {
        const t = h.tensors.get(name)!;
        const it = index.tensors.get(name)!;
        expect(ggufTensorDType(h, t)).toBe('q8_0');
        expect(it.dtype).toBe('q8_0');
        expect(it.shape).toEqual(want.shape);
        expect(t.length).toBe(storedBytes('q8_0', want.shape.reduce((a, b) => a * b, 1)));
        const bytes = new Uint8Array(t.length);
        expect(readSync(fd, bytes, 0, t.length, t.offset)).toBe(t.length);
        const f32 = addon().convertDtype(bytes, 'q8_0', 'f32');
        expect(f32.length).toBe(it.shape.reduce((a, b) => a * b, 1) * 4);
        expect(createHash('sha256').update(f32).digest('hex'), name).toBe(want.sha256);
        expect([...new Float32Array(f32.buffer, f32.byteOffset, 8)]).toEqual(want.first8);
      }
    } finally {
      closeSync(fd);
    }
  });
});

describe('convertDtype and q8_0', () => {
  it('refuses q8_0 as a target and a length that is not whole blocks', () => {
    expect(() => addon().convertDtype(new Uint8Array(8), 'f32', 'q8_0')).toThrow(/q8_0/);
    expect(() => addon().convertDtype(new Uint8Array(35), 'q8_0', 'f32')).toThrow(/whole number/);
  });
  it('narrows widened q8_0 to bf16 as it narrows f32 (one rounding from the f32 values)', () => {
    const block = new Uint8Array(34);
    block[0] = 0x00; // scale 1.5 (f16 0x3e00)
    block[1] = 0x3e;
    for (let j = 0; j < 32; j++) block[2 + j] = (j * 37) & 0xff;
    const f32 = addon().convertDtype(block, 'q8_0', 'f32');
    expect(addon().convertDtype(block, 'q8_0', 'bf16')).toEqual(addon().convertDtype(f32, 'f32', 'bf16'));
    const v = new Float32Array(f32.buffer, f32.byteOffset, 32);
    for (let j = 0; j < 32; j++) expect(v[j]).toBe(((((j * 37) & 0xff) << 24) >> 24) * 1.5);
  });
});
