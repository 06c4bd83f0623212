// One engine in its own process (forked by bench/pieces/ort-peer.mjs, so that its peak RSS is its
// own): loads, then answers the parent's messages over IPC: 'warm' (one untimed run), 'run' (one
// timed run: ms, foreign load), 'done' (peak RSS, then exit). Roles:
//   prep    tessera encodes the image once with stages and writes the block stack's input (the
//           embed stage) and output (the last block) as raw f32 files for the other engines
//   tessera the tower at `threads` threads; ms = sum of the block stages' wall times (onProgress),
//           blockMs = each block's
//   ort     onnxruntime-node on one ONNX variant at `threads` intra-op threads; ms = session.run
//           (from `ortDir` when given: a copy held to a lower ISA, ort-held.mjs). With `files` (the
//           Qwen2.5-VL blocks, family 'qwen25'), one session per file, each fed the previous one's
//           output: blockMs = each session.run's, ms = their sum; rows go in window order.
// `depth` (default the Qwen3.5 stack's DEPTH) is the tower's block count.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { measureForeign } from './quiet.mjs';
import { DEPTH as STACK_DEPTH, HIDDEN, ropeTables } from './model.mjs';
import { Q25, ortInputs, permuteRows } from './model-qwen25.mjs';

const require = createRequire(import.meta.url);
const job = JSON.parse(process.argv[2]);
const N = job.grid.h * job.grid.w;
const DEPTH = job.depth ?? STACK_DEPTH;
const qwen25 = job.family === 'qwen25';
const PATCH_COLS = 3 * 2 * (qwen25 ? 14 : 16) ** 2; // C x T x P x P values per patch row
const rss = () => process.resourceUsage().maxRSS / 1024; // MiB

function pixels() {
  const px = new Float32Array(N * PATCH_COLS);
  for (let i = 0; i < px.length; i++) px[i] = Math.sin(i * 0.37) * 0.9;
  return px;
}
const readF32 = (file) => { const b = readFileSync(file); return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4); };
const absmax = (a) => { let m = 0; for (const v of a) m = Math.max(m, Math.abs(v)); return m; };
function relDiff(a, ref) {
  let d = 0, finite = true;
  for (let i = 0; i < a.length; i++) { if (!Number.isFinite(a[i])) finite = false; d = Math.max(d, Math.abs(a[i] - ref[i])); }
  return finite ? d / absmax(ref) : Infinity;
}

async function openTessera(threads, precision = 'f32') {
  const { VisionTower } = await import('../../../dist/index.js');
  return VisionTower.open(job.tower, { backend: 'cpu', residency: 'resident', threads, precision });
}

/** Returns { run(): Promise<{ ms, wall }>, check(): relative difference to tessera's output, close() }. */
async function makeEngine() {
  if (job.role === 'tessera') {
    const tower = await openTessera(job.threads, job.precision);
    const px = pixels();
    return {
      async run() {
        const blockMs = [];
        const t0 = performance.now();
        await tower.encodePixels({ pixelValues: px, grid: job.grid }, {
          onProgress: (p) => { if (p.block >= 2 && p.block < p.blocks) blockMs.push(p.ms); }, // embed, blocks, merged
        });
        const wall = performance.now() - t0;
        if (blockMs.length !== DEPTH) throw new Error(`expected ${DEPTH} block progress events, got ${blockMs.length}`);
        return { ms: blockMs.reduce((a, b) => a + b, 0), wall, blockMs };
      },
      check: () => 0,
      close: () => tower.close(),
    };
  }
  if (job.role === 'ort') {
    const ort = require(job.ortDir ?? 'onnxruntime-node');
    const opts = { intraOpNumThreads: job.threads, interOpNumThreads: 1, graphOptimizationLevel: 'all', executionMode: 'sequential', logSeverityLevel: 3 };
    const sessions = [];
    for (const f of job.files ?? [job.file]) sessions.push(await ort.InferenceSession.create(f, opts));
    const width = qwen25 ? Q25.hidden : HIDDEN;
    // Qwen2.5-VL: rows and rope tables in window order (HF permutes once, before the blocks; untimed here)
    const win = qwen25 ? ortInputs(job.grid) : null;
    const embed = readF32(join(job.dir, 'embed.f32'));
    const x = win ? permuteRows(embed, win.order, width) : embed;
    const { cos, sin } = win ?? ropeTables(job.grid);
    const pos = BigInt64Array.from({ length: N }, (_, i) => BigInt(i));
    const feeds = (session, xs) => {
      const f = { x: new ort.Tensor('float32', xs, [N, width]), cos: new ort.Tensor('float32', cos, [N, cos.length / N]), sin: new ort.Tensor('float32', sin, [N, sin.length / N]) };
      if (session.inputNames.includes('pos')) f.pos = new ort.Tensor('int64', pos, [1, N]);
      return f;
    };
    let y = null;
    return {
      async run() {
        const blockMs = [];
        let cur = x;
        for (const session of sessions) {
          const f = feeds(session, cur);
          const t0 = performance.now();
          cur = (await session.run(f)).y.data;
          blockMs.push(performance.now() - t0);
        }
        y = cur;
        const ms = blockMs.reduce((a, b) => a + b, 0);
        return { ms, wall: ms, blockMs };
      },
      check: () => relDiff(win ? permuteRows(y, win.order, width, true) : y, readF32(join(job.dir, 'out.f32'))),
      close: () => Promise.all(sessions.map((s) => s.release())),
    };
  }
  throw new Error(`unknown role ${job.role}`);
}

async function prep() {
  const tower = await openTessera(job.threads);
  const r = await tower.encodePixels({ pixelValues: pixels(), grid: job.grid }, { stages: true });
  const last = r.stages[`block.${DEPTH - 1}`];
  if (!r.stages.embed || !last) throw new Error(`stages missing: ${Object.keys(r.stages).join(', ')}`);
  writeFileSync(join(job.dir, 'embed.f32'), r.stages.embed);
  writeFileSync(join(job.dir, 'out.f32'), last);
  await tower.close();
  return { outAbsmax: absmax(last) };
}

if (job.role === 'prep') {
  process.send({ ok: true, ...(await prep()), maxRssMiB: rss() }, () => process.exit(0));
} else {
  const t0 = performance.now();
  const engine = await makeEngine();
  process.send({ ok: true, loadMs: performance.now() - t0 });
  process.on('message', async (msg) => {
    try {
      if (msg === 'warm') {
        const m = await measureForeign(() => engine.run());
        process.send({ ok: true, ...m.r, foreign: m.foreign, relDiff: engine.check() });
      } else if (msg === 'run') {
        const m = await measureForeign(() => engine.run());
        process.send({ ok: true, ...m.r, own: m.own, foreign: m.foreign });
      } else if (msg === 'done') {
        await engine.close();
        process.send({ ok: true, maxRssMiB: rss() }, () => process.exit(0));
      }
    } catch (e) {
      process.send({ ok: false, error: String(e?.stack ?? e) }, () => process.exit(1));
    }
  });
}
