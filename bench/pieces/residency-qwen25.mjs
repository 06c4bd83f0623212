// Bench piece: the three weight residencies on the synthetic full-size Qwen2.5-VL-7B-shaped tower (32 blocks,
// hidden 1280, MLP 3420, window 112, full attention at 7/15/23/31, out 3584, bf16;
// bench/make-synthetic-qwen25.mjs) encoding one 4,096-patch image (64x64 patches, 896x896 pixels), each
// residency in a fresh child process taking turns with the others (residency.mjs's machinery). The bars:
// `stream` in at most a quarter of `resident`'s peak RSS, at at most 1.1x its time.
//   npm run bench -- residency-qwen25
//   node bench/pieces/residency-qwen25.mjs      (prints the section; needs `npm run build`)
import { makeSyntheticQwen25 } from '../make-synthetic-qwen25.mjs';
import { measureResidency, residencyTable } from './residency.mjs';

export const QWEN25_BARS = { rss: 0.25, time: 1.1 };
const MiB = 2 ** 20;

// One slot: at 4,096 patches a block computes for seconds and reads in tens of milliseconds, so a second slot
// (the default, which hides the read of the next stage behind this one's work for small images) would only add a
// slot's memory, sized for the largest stage, the merger.
export const QWEN25_SLOTS = 1;

export async function section({ rounds = 3, runs = 1, page = [64, 64], slots = QWEN25_SLOTS } = {}) {
  const m = measureResidency({ model: makeSyntheticQwen25(), rounds, runs, slots, page, batch: null, bars: QWEN25_BARS });
  const s = m.rows.stream.memory;
  return {
    title: 'Weight residency (synthetic Qwen2.5-VL-7B-shaped tower, 4,096 patches, CPU)',
    body: [
      `Synthetic full-size tower (32 blocks, hidden 1280, 16 heads of 80, MLP 3420, window 112 px, full attention at 7/15/23/31, out 3584, bf16 weights: ${(s.fileBytes / MiB).toFixed(0)} MiB), one ${m.page.h}x${m.page.w}-patch image (${m.page.patches} patches, 896x896 pixels) through \`encodePixels\` on the CPU backend, f32. Each residency runs in a fresh process, ${m.rows.resident.firstMs.length} times, taking turns with the others; each process warms up with one encode (page cache warm) and then times ${m.rows.resident.all.length / m.rows.resident.firstMs.length}; ms = the median of all, the fastest beside it, first = the fastest warm-up; the time bar compares medians. Peak RSS = the largest maxRSS of its processes (Node's own ~50 MiB and the image's activations included). \`stream\` uses ${s.slots} slot(s) of ${(s.slotBytes / MiB).toFixed(1)} MiB (sized for the largest stage, the merger; one slot at this size, see QWEN25_SLOTS). MiB read = per process (\`stats().bytesRead\`). Command: \`npm run bench -- residency-qwen25\` (bench/pieces/residency-qwen25.mjs).`,
      '',
      ...residencyTable(m),
    ].join('\n'),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice(9) ?? 3);
  const s = await section({ rounds });
  console.log(`## ${s.title}\n\n${s.body}`);
}
