// Bench piece: peak RSS of a bulk run against its image count, on the synthetic real-size Qwen3.5 tower
// (27 blocks, hidden 1152, bf16; bench/make-synthetic-qwen.mjs). `tessera encode <folder> --out-dir`
// over 10, 100 and 1,000 small PNGs (32x32 budget: one merged token each, so the run is about the
// pipeline's memory, not the activations'), each run a fresh process, its peak RSS from the CLI's own
// --json summary (process.resourceUsage().maxRSS).
//   node bench/pieces/bulk-memory.mjs          (prints the section; needs `npm run build`)
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { makeSyntheticQwen } from '../make-synthetic-qwen.mjs';

const CLI = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const COUNTS = [10, 100, 1000];

async function folder(root, n, seeds) {
  const dir = join(root, `in-${n}`);
  for (let i = 0; i < n; i++) {
    const sub = join(dir, `d${i % 10}`);
    if (i < 10) mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, `img-${String(i).padStart(4, '0')}.png`), seeds[i % seeds.length]);
  }
  return dir;
}

export async function benchBulkMemory() {
  const model = makeSyntheticQwen();
  const root = mkdtempSync(join(tmpdir(), 'tessera-bulk-memory-'));
  try {
    const seeds = await Promise.all(Array.from({ length: 10 }, (_, k) =>
      sharp(Buffer.alloc(48 * 40 * 3, k * 25), { raw: { width: 48, height: 40, channels: 3 } }).png().toBuffer()));
    const rows = [];
    for (const n of COUNTS) {
      const dir = await folder(root, n, seeds);
      const r = spawnSync(process.execPath, [CLI, 'encode', dir, '--model', model, '--out-dir', join(root, `out-${n}`),
        '--min-pixels', '1024', '--max-pixels', '1024', '--json'], { encoding: 'utf8', maxBuffer: 256 << 20 });
      if (r.status !== 0) throw new Error(`bulk-memory: encode of ${n} images failed (${r.status}): ${r.stderr}`);
      const summary = JSON.parse(r.stdout.trim().split('\n').pop());
      rows.push({ n, encoded: summary.encoded, peak: summary.peakRssBytes, rate: summary.imagesPerSecond });
    }
    return rows;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

export async function section() {
  const rows = await benchBulkMemory();
  const base = rows[0].peak;
  const mib = (b) => (b / 2 ** 20).toFixed(0);
  const lines = [
    '`tessera encode <folder> --out-dir` on the synthetic real-size Qwen3.5 tower (bf16 weights, residency auto),',
    'small PNGs at a 32x32 budget, each run a fresh process; peak RSS from the CLI\'s --json summary.',
    '',
    '| images | encoded | peak RSS MiB | vs 10 images | images/s |',
    '| ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((r) => `| ${r.n} | ${r.encoded} | ${mib(r.peak)} | ${r.peak === base ? '-' : `${((r.peak / base - 1) * 100).toFixed(1)} %`} | ${r.rate.toFixed(1)} |`),
  ];
  return { title: 'Bulk runs: peak memory against the image count', body: lines.join('\n') };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const s = await section();
  process.stdout.write(`## ${s.title}\n\n${s.body}\n`);
}
