// The native bicubic resize against Pillow 12.3's Image.resize(BICUBIC, reducing_gap=None) on
// xorshift32 noise (byte noise and 0/255 noise), over size pairs that hit every branch: down,
// up, one axis only, identity, 1-pixel sides, extreme ratios. Hashes from pillow_reference.py.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { resizeRgb8 } from '../src/image/index.js';
import { FIXTURES, readJson } from './helpers/images.js';

interface Pair {
  w: number;
  h: number;
  ow: number;
  oh: number;
  binary: boolean;
  sha256: string;
}

/** The same generator as pillow_reference.py's noise(). */
function noise(w: number, h: number, binary: boolean): Uint8Array {
  let x = 0x9e3779b9 >>> 0;
  const out = new Uint8Array(w * h * 3);
  for (let i = 0; i < out.length; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out[i] = binary ? (x & 1) * 255 : x & 0xff;
  }
  return out;
}

const pairs = readJson<{ resize: Pair[] }>(FIXTURES + 'image-edge/expected.json').resize;

describe('bicubic resize equals Pillow', () => {
  for (const p of pairs) {
    it(`${p.w}x${p.h} -> ${p.ow}x${p.oh}${p.binary ? ' (0/255)' : ''}`, async () => {
      const out = await resizeRgb8(noise(p.w, p.h, p.binary), p.w, p.h, p.ow, p.oh);
      expect(out.length).toBe(p.ow * p.oh * 3);
      expect(createHash('sha256').update(out).digest('hex')).toBe(p.sha256);
    });
  }

  it('refuses a buffer of the wrong length with ERR_INVALID_ARGUMENT', async () => {
    await expect(resizeRgb8(new Uint8Array(10), 2, 2, 4, 4)).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
