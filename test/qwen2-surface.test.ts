// The Qwen2-VL and Qwen2.5-VL towers through the rest of the public surface (their numerics against HF are
// model-qwen2-tower.test.ts's): encodeMany equal to encode bit for bit, estimate's tokens and scratch, progress
// once per stage and abort between stages, `tessera encode --format vllm|sglang` carrying the tower's own rows and
// grid, `tessera pack` then `tessera inspect` of the packed copy, and a fleet worker (a real redis-server) writing
// exactly what encode gives.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, enqueueImages, waitForJobs } from '../src/fleet/index.js';
import { TesseraError, VisionTower, type EncodeResult } from '../src/index.js';
import { FIXTURES, readJson } from './helpers/fixtures.js';
import { expectOutputsEqualEncode, HAVE_REDIS, makeImages, useFleet } from './helpers/fleet.js';
import { readNpy } from './helpers/npy.js';
import { tesseraInProcess as tessera } from './helpers/cli.js';

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);


async function rejection(p: Promise<unknown>): Promise<TesseraError> {
  try {
    await p;
  } catch (e) {
    return e as TesseraError;
  }
  throw new Error('expected a rejection');
}

let tmp: string;
let images: string[];
beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'tessera-qwen2-surface-'));
  images = await makeImages(join(tmp, 'images'), 3, false);
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

for (const fixture of ['qwen2_vl-tiny', 'qwen2_5_vl-tiny']) {
  const model = join(FIXTURES, fixture, 'model');
  const { family } = readJson<{ family: string }>(join(FIXTURES, fixture, 'cases.json'));

  describe(`${fixture} through the library`, () => {
    let tower: VisionTower;
    beforeAll(async () => {
      tower = await VisionTower.open(model, { backend: 'cpu' });
    });
    afterAll(() => tower?.close());

    it('encodeMany equals encode bit for bit, and estimate predicts its tokens, patches and scratch', async () => {
      const got: EncodeResult[] = [];
      for await (const item of tower.encodeMany(images, { batch: 2 })) {
        expect(item.error, String(item.error)).toBeUndefined();
        got[item.index] = item.result!;
      }
      expect(got).toHaveLength(images.length);
      for (const [i, file] of images.entries()) {
        const one = await tower.encode(file);
        const est = await tower.estimate(file);
        expect(bits(got[i]!.embeddings).equals(bits(one.embeddings)), file).toBe(true);
        expect(got[i]!.grid).toEqual(one.grid);
        expect(one.tokens).toBe(est.tokens);
        expect(one.grid!.reduce((a, g) => a + g.t * g.h * g.w, 0)).toBe(est.patches);
        expect(est.scratchBytes).toBe(tower.scratchBytes(est.patches));
        expect(one.embeddings.length).toBe(one.tokens * tower.info.outHidden);
      }
    });

    it('reports progress once per stage in order, and an abort between stages stops the encode and leaves the tower usable', async () => {
      const stages = tower.info.depth + 2; // embed, the blocks, the merger
      const seen: number[] = [];
      const ref = await tower.encode(images[0]!, { onProgress: (p) => seen.push(p.block) });
      expect(seen).toEqual(Array.from({ length: stages }, (_, k) => k + 1));

      const pre = new AbortController();
      pre.abort(new Error('the user left'));
      expect((await rejection(tower.encode(images[0]!, { signal: pre.signal }))).code).toBe('ERR_ABORTED');

      // 64 x 64 patches: each stage takes long enough that the encode is still mid-tower when the flag is set.
      const big = new Float32Array(4096 * 3 * 2 * tower.info.patchSize ** 2).map((_, i) => Math.sin(i * 0.001));
      const during = new AbortController();
      const partial: number[] = [];
      const e = await rejection(
        tower.encodePixels({ pixelValues: big, grid: { t: 1, h: 64, w: 64 } }, { signal: during.signal, onProgress: (p) => (partial.push(p.block), during.abort()) }),
      );
      expect(e.code).toBe('ERR_ABORTED');
      expect(partial.length).toBeLessThan(stages);
      const again = await tower.encode(images[0]!);
      expect(bits(again.embeddings).equals(bits(ref.embeddings))).toBe(true);
    });
  });

  describe(`${fixture} through the CLI`, () => {
    it('--format vllm and sglang hold the tower\'s own rows and grid', async () => {
      const tower = await VisionTower.open(model, { backend: 'cpu' });
      const mine = await tower.encode(images[1]!);
      await tower.close();
      const { t, h, w } = mine.grid![0]!;
      // The one file of that kind the encode wrote (where --out-dir places an input is bulk-formats.test.ts's).
      const at = (dir: string, ext: string) => {
        const found = (readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith(ext));
        expect(found, `${ext} under ${dir}`).toHaveLength(1);
        return join(dir, found[0]!);
      };

      const vdir = join(tmp, `${fixture}-vllm`);
      const v = await tessera('encode', images[1]!, '--model', model, '--out-dir', vdir, '--format', 'vllm');
      expect(v.code, v.stderr).toBe(0);
      const part = JSON.parse(readFileSync(at(vdir, '.vllm.json'), 'utf8'));
      const embeds = readNpy(Buffer.from(part.image_embeds.image_embeds, 'base64'));
      expect(embeds.shape).toEqual([mine.tokens, mine.width]);
      expect(bits(embeds.data as Float32Array).equals(bits(mine.embeddings))).toBe(true);
      expect(Array.from(readNpy(Buffer.from(part.image_embeds.image_grid_thw, 'base64')).data as BigInt64Array, Number)).toEqual([t, h, w]);
      const rec = JSON.parse(readFileSync(at(vdir, '.tessera.json'), 'utf8'));
      expect(rec.record).toMatchObject({ format: 'vllm', family, tokens: mine.tokens });

      const sdir = join(tmp, `${fixture}-sglang`);
      const s = await tessera('encode', images[1]!, '--model', model, '--out-dir', sdir, '--format', 'sglang');
      expect(s.code, s.stderr).toBe(0);
      const item = JSON.parse(readFileSync(at(sdir, '.sglang.json'), 'utf8'));
      expect(item.image_grid_thw).toEqual([[t, h, w]]);
      expect(Float32Array.from(item.feature.flat() as number[])).toEqual(mine.embeddings);
    });

    it('tessera pack writes a folder that inspect reads as the same family and that encodes bit for bit', async () => {
      const packed = join(tmp, `${fixture}-packed`);
      const p = await tessera('pack', model, packed);
      expect(p.code, p.stderr).toBe(0);
      const i = await tessera('inspect', packed, '--json');
      expect(i.code, i.stderr).toBe(0);
      expect(JSON.parse(i.stdout)).toMatchObject({ family });
      const [a, b] = await Promise.all([VisionTower.open(model, { backend: 'cpu' }), VisionTower.open(packed, { backend: 'cpu' })]);
      const [ra, rb] = [await a.encode(images[2]!), await b.encode(images[2]!)];
      await Promise.all([a.close(), b.close()]);
      expect(bits(rb.embeddings).equals(bits(ra.embeddings))).toBe(true);
    });
  });
}

describe.skipIf(!HAVE_REDIS)(`the fleet with a Qwen2.5-VL tower${HAVE_REDIS ? '' : ' (skipped: redis-server is not installed; Debian package redis-server)'}`, () => {
  const fleet = useFleet('qwen2');

  it("a worker holding the tower writes exactly encode's output for every job", async () => {
    const model = join(FIXTURES, 'qwen2_5_vl-tiny', 'model');
    const out = join(fleet.tmp, 'out');
    const client = new Redis(fleet.redis.url, { maxRetriesPerRequest: null });
    const tower = await VisionTower.open(model, { backend: 'cpu' });
    const worker = await createWorker({ redis: client, queue: 'qwen2', model: tower, outDir: out, name: 'qwen2' });
    const queue = new Queue('qwen2', { connection: client });
    const root = join(tmp, 'images');
    const jobs = await enqueueImages(queue, images.map((input) => ({ input, rel: relative(root, input) })));
    const outcome = await waitForJobs(queue, client, jobs.map((j) => j.id));
    expect(outcome.failed).toEqual([]);
    expect(outcome.completed).toHaveLength(images.length);
    await expectOutputsEqualEncode(root, out, images, {}, model);
    await worker.close();
    await queue.close();
    await tower.close();
    client.disconnect();
  });
});
