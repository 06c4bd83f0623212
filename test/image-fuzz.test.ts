// Seeded fuzzing of image admission and decoding: mutants (flips, truncations, splices, boundary
// values, inserted runs) of one small file per format sharp reads here, given as bytes and as files,
// through the header read and both families' preprocessing. A fixed number of cases from a fixed
// seed per format; the property is test/helpers/fuzz.ts's: pixels, or a TesseraError with a known
// code, never another exception, never ERR_INTERNAL, never a hang.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseGemmaPreprocessConfig, parseQwenPreprocessConfig, preprocessGemma, preprocessQwen, readImageHeader } from '../src/image/index.js';
import { OutcomeTally, Rng, fuzzCases, mutate, outcomeOf } from './helpers/fuzz.js';
import { FIXTURES } from './helpers/images.js';

const EDGE = join(FIXTURES, 'image-edge');
const SOURCES: [string, string][] = [
  ['png', join(FIXTURES, 'images', 'tiny.png')],
  ['palette png', join(EDGE, 'palette_trns.png')],
  ['16-bit png', join(EDGE, 'gray16.png')],
  ['jpeg', join(EDGE, 'orient6.jpg')],
  ['progressive jpeg', join(EDGE, 'progressive.jpg')],
  ['cmyk jpeg', join(EDGE, 'cmyk.jpg')],
  ['gif', join(EDGE, 'anim_trns.gif')],
  ['webp', join(EDGE, 'lossy.webp')],
  ['tiff', join(EDGE, 'rgb8.tiff')],
  ['avif', join(EDGE, 'photo.avif')],
];
const qwen = parseQwenPreprocessConfig({ size: { shortest_edge: 16384, longest_edge: 131072 }, patch_size: 16, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] });
const gemma = parseGemmaPreprocessConfig({ max_soft_tokens: 70 });
// A small admission limit keeps mutants whose header grows the image cheap to refuse.
const admission = { maxInputPixels: 4_000_000 };

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'tessera-image-fuzz-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('image admission and decoding fuzz', () => {
  SOURCES.forEach(([format, path], k) => {
    const seed = 0x1ace0000 + k;
    it(`${format}: 150 mutants through the header read and Qwen / Gemma 4 preprocessing: pixels or a code (seed 0x${seed.toString(16)})`, async () => {
      const src = readFileSync(path);
      const rng = new Rng(seed);
      const tally = new OutcomeTally();
      const file = join(scratch, `mutant-${k}`);
      for (let i = 0; i < fuzzCases(150); i++) {
        const bytes = mutate(src, rng);
        const what = `${format} seed 0x${seed.toString(16)} case ${i}`;
        tally.add(await outcomeOf(`${what} (header)`, () => readImageHeader(bytes, admission)));
        if (i % 2 === 0) tally.add(await outcomeOf(`${what} (qwen)`, () => preprocessQwen(bytes, qwen, admission)));
        else {
          writeFileSync(file, bytes);
          tally.add(await outcomeOf(`${what} (gemma, from a file)`, () => preprocessGemma(file, gemma, admission)));
        }
      }
      // The mutants must reach the refusals, not only decode.
      expect(tally.get('ERR_IMAGE_DECODE'), String(tally)).toBeGreaterThan(5);
    });
  });
});
