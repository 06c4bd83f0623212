// Hostile and broken inputs: every one ends in a TesseraError with the right code, refusals that
// the header decides never decode pixels, and a seeded fuzz smoke test (truncations and byte flips
// of a PNG and a JPEG) never crashes, hangs or escapes with anything but a coded error.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TesseraError } from '../src/errors.js';
import {
  parseGemmaPreprocessConfig,
  parseQwenPreprocessConfig,
  preprocessGemma,
  preprocessQwen,
  readImageHeader,
} from '../src/image/index.js';
import { FIXTURES, IMAGES, pngClaiming } from './helpers/images.js';

const qwen = parseQwenPreprocessConfig({ size: { shortest_edge: 16384, longest_edge: 131072 }, patch_size: 16, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] });
const gemma = parseGemmaPreprocessConfig({ max_soft_tokens: 70 });

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    expect(err).toBeInstanceOf(TesseraError);
    return (err as TesseraError).code;
  }
}

describe('refused from the header alone', () => {
  it('a 100000 x 100000 PNG header is ERR_IMAGE_TOO_LARGE (the file holds one row: decoding would fail otherwise)', async () => {
    const huge = pngClaiming(100000, 100000, 1);
    expect(await codeOf(preprocessQwen(huge, qwen))).toBe('ERR_IMAGE_TOO_LARGE');
    expect(await codeOf(preprocessGemma(huge, gemma))).toBe('ERR_IMAGE_TOO_LARGE');
    expect(await codeOf(readImageHeader(huge))).toBe('ERR_IMAGE_TOO_LARGE');
  });
  it('the pixel limit is configurable', async () => {
    expect(await codeOf(preprocessQwen(IMAGES + 'coffee.png', qwen, { maxInputPixels: 600 * 400 - 1 }))).toBe('ERR_IMAGE_TOO_LARGE');
    expect(await codeOf(preprocessQwen(IMAGES + 'coffee.png', qwen, { maxInputPixels: 600 * 400 }))).toBe('resolved');
    expect(await codeOf(preprocessQwen(IMAGES + 'coffee.png', qwen, { maxInputPixels: -1 }))).toBe('ERR_INVALID_ARGUMENT');
  });
  it('Qwen: aspect ratio above 200 is ERR_IMAGE_ASPECT from the header; Gemma has no such limit', async () => {
    const thin = pngClaiming(2010, 10, 1); // ratio 201, one row of pixel data
    expect(await codeOf(preprocessQwen(thin, qwen))).toBe('ERR_IMAGE_ASPECT');
    expect(await codeOf(preprocessGemma(thin, gemma))).toBe('ERR_IMAGE_DECODE'); // admitted, then truncated
    expect(await codeOf(preprocessQwen(pngClaiming(2000, 10, 10), qwen))).toBe('resolved'); // exactly 200
  });
});

describe('undecodable input is ERR_IMAGE_DECODE', () => {
  const png = readFileSync(IMAGES + 'coffee.png');
  const jpg = readFileSync(IMAGES + 'astronaut.jpg');
  const cases: [string, string | Buffer | Uint8Array][] = [
    ['an empty buffer', Buffer.alloc(0)],
    ['an empty Uint8Array', new Uint8Array(0)],
    ['text', Buffer.from('this is not an image at all')],
    ['a directory', FIXTURES + 'images'],
    ['a PNG cut in half', png.subarray(0, png.length >> 1)],
    ['a JPEG cut in half', jpg.subarray(0, jpg.length >> 1)],
    ['a PNG signature alone', png.subarray(0, 8)],
    ['a PNG whose header claims 4000x3000 but holds 10 rows', pngClaiming(4000, 3000, 10)],
    ['a PNG of width 0', pngClaiming(0, 10, 0)],
    ['a PNG of height 0', pngClaiming(10, 0, 0)],
  ];
  for (const [what, input] of cases) {
    it(what, async () => {
      expect(await codeOf(preprocessQwen(input, qwen))).toBe('ERR_IMAGE_DECODE');
    });
  }
  it('a PNG cut anywhere inside its pixel data, which libspng would hand back partly grey, as Pillow refuses it', async () => {
    // Pillow's load() raises "image file is truncated" for each of these; a half-grey page must never be encoded.
    for (let tenth = 1; tenth < 10; tenth++) {
      const cut = png.subarray(0, Math.floor((png.length * tenth) / 10));
      expect(await codeOf(preprocessQwen(cut, qwen)), `cut at ${tenth}0 %`).toBe('ERR_IMAGE_DECODE');
    }
  });
});

describe('a file that is not there is the file system\'s error', () => {
  it('a missing file is ERR_IO with ENOENT as its cause, and the message names the file', async () => {
    const err = await preprocessQwen(FIXTURES + 'images/no-such-file.png', qwen).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TesseraError);
    expect((err as TesseraError).code).toBe('ERR_IO');
    expect(((err as TesseraError).cause as NodeJS.ErrnoException).code).toBe('ENOENT');
    expect((err as Error).message).toMatch(/no-such-file\.png/);
  });
  it('a path with a NUL byte is ERR_INVALID_ARGUMENT', async () => {
    expect(await codeOf(preprocessQwen(IMAGES + 'tiny.png\0.png', qwen))).toBe('ERR_INVALID_ARGUMENT');
  });
});

describe('bad arguments are ERR_INVALID_ARGUMENT', () => {
  it('input of the wrong type, bad budgets, bad pixel bounds', async () => {
    expect(await codeOf(preprocessQwen(42 as unknown as string, qwen))).toBe('ERR_INVALID_ARGUMENT');
    expect(await codeOf(preprocessGemma(IMAGES + 'tiny.png', gemma, { maxSoftTokens: 100 }))).toBe('ERR_INVALID_ARGUMENT');
    expect(await codeOf(preprocessQwen(IMAGES + 'tiny.png', qwen, { minPixels: 0 }))).toBe('ERR_INVALID_ARGUMENT');
  });
});

describe('fuzz smoke: mutated PNG and JPEG', () => {
  // Seeded LCG: the same mutations every run.
  let s = 20261130;
  const rand = (n: number) => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 8) % n;
  const sources = { png: readFileSync(IMAGES + 'tiny.png'), jpg: readFileSync(FIXTURES + 'image-edge/orient6.jpg') };
  const allowed = new Set(['resolved', 'ERR_IMAGE_DECODE', 'ERR_IMAGE_TOO_LARGE', 'ERR_IMAGE_ASPECT']);
  for (const [kind, src] of Object.entries(sources)) {
    it(`${kind}: 40 truncations and 40 byte-flip mutants`, async () => {
      const seen = new Map<string, number>();
      for (let i = 0; i < 80; i++) {
        let buf: Buffer;
        if (i < 40) {
          buf = src.subarray(0, rand(src.length));
        } else {
          buf = Buffer.from(src);
          const flips = 1 + rand(8);
          for (let f = 0; f < flips; f++) buf[rand(buf.length)] = rand(256);
        }
        // A small pixel limit keeps mutants whose header grows the image cheap to refuse.
        const code = await codeOf(preprocessQwen(buf, qwen, { maxInputPixels: 4_000_000 }));
        expect(allowed.has(code), `mutant ${i}: ${code}`).toBe(true);
        seen.set(code, (seen.get(code) ?? 0) + 1);
      }
      // The truncations cannot all succeed: the fuzz must actually reach the error paths.
      expect(seen.get('ERR_IMAGE_DECODE') ?? 0).toBeGreaterThan(10);
    });
  }
});
