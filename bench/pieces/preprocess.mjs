// Bench piece: preprocessing cost of a 12-megapixel JPEG photo (4032x3024, generated here with
// sharp from the astronaut photo, quality 90) to each family's default budget: Qwen3.5/Qwen3-VL
// (min 65536, max 16777216 pixels: 3008x4032, 47376 patches) and Gemma 4 (280 soft tokens:
// 672x912), plus the other Gemma budgets. decode = read + sharp decode; preprocess = the native
// conversion, Pillow-exact resize, normalise and patchify. Median of 5 runs after a warm-up.
//   node bench/pieces/preprocess.mjs            (prints the section; needs `npm run build`)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';

const root = fileURLToPath(new URL('../..', import.meta.url));
const RUNS = 5;

async function makePhoto() {
  const dir = join(root, 'bench', 'out');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'photo-12mp.jpg');
  const src = join(root, 'test', 'fixtures', 'images', 'astronaut_big.jpg');
  writeFileSync(path, await sharp(src).resize(4032, 3024, { fit: 'fill' }).jpeg({ quality: 90 }).toBuffer());
  return path;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Rows: { family, budget, input, resized, patches, tokens, decodeMs, preprocessMs, totalMs } (medians). */
export async function benchPreprocess() {
  const img = await import(join(root, 'dist', 'image', 'index.js'));
  const photo = await makePhoto();
  const qwen = img.parseQwenPreprocessConfig(img.QWEN_HUB_PREPROCESSOR_CONFIG);
  const gemma = img.parseGemmaPreprocessConfig({});
  const cases = [
    { family: 'Qwen3.5 / Qwen3-VL', budget: 'default (max 16777216 px)', run: () => img.preprocessQwen(photo, qwen) },
    { family: 'Qwen3.5 / Qwen3-VL', budget: 'maxPixels 1048576', run: () => img.preprocessQwen(photo, qwen, { maxPixels: 1048576 }) },
    ...[280, 70, 1120].map((s) => ({
      family: 'Gemma 4',
      budget: `${s} soft tokens${s === 280 ? ' (default)' : ''}`,
      run: () => img.preprocessGemma(photo, gemma, { maxSoftTokens: s }),
    })),
  ];
  const rows = [];
  for (const c of cases) {
    await c.run(); // warm-up (page cache, thread pool, sharp)
    const dec = [], pre = [], tot = [];
    let last;
    for (let r = 0; r < RUNS; r++) {
      last = await c.run();
      dec.push(last.timings.decodeMs);
      pre.push(last.timings.preprocessMs);
      tot.push(last.timings.decodeMs + last.timings.preprocessMs);
    }
    rows.push({
      family: c.family,
      budget: c.budget,
      input: `${last.decoded.width}x${last.decoded.height}`,
      resized: `${last.resized.width}x${last.resized.height}`,
      patches: last.patches,
      tokens: last.tokens,
      decodeMs: median(dec),
      preprocessMs: median(pre),
      totalMs: median(tot),
    });
  }
  return rows;
}

export async function section() {
  const rows = await benchPreprocess();
  const lines = [
    'A 12-megapixel JPEG (4032x3024, quality 90) to pixel_values, per family and budget; median of 5 runs.',
    'decode = read + sharp decode (libjpeg, one pass); preprocess = native conversion, Pillow-exact bicubic',
    'resize, rescale/normalise and patchify (threaded).',
    '',
    '| family | budget | resized (WxH) | patches | tokens | decode ms | preprocess ms | total ms |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) => `| ${r.family} | ${r.budget} | ${r.resized} | ${r.patches} | ${r.tokens} | ${r.decodeMs.toFixed(0)} | ${r.preprocessMs.toFixed(0)} | ${r.totalMs.toFixed(0)} |`,
    ),
  ];
  return { title: 'Image preprocessing (12 MP JPEG)', body: lines.join('\n') };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const s = await section();
  process.stdout.write(`## ${s.title}\n\n${s.body}\n`);
}
