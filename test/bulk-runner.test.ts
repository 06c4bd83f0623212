// The one bulk job runner (src/bulk/runner.ts), which `tessera encode`, the fleet's image jobs and its
// group jobs all run: one outcome per input with its index; with outputs, each encoded image's files
// are writeImageOutputs' and its embeddings tower.encode's; a rerun skips every up-to-date image and
// reports the files and tokens of the first run; a changed input is redone; an undecodable image, a
// loader that throws and an output that cannot be written each fail alone, with their own code and
// the step they failed in; the manifest gets one line per outcome; without outputs nothing is written.
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, utimesSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { loadFile, openOutputDir, outputJob, runBulk, type BulkInput, type BulkOutcome, type InputLoader } from '../src/bulk/index.js';
import { TesseraError } from '../src/errors.js';
import { FIXTURES } from './helpers/fixtures.js';
import { readSafetensors, asFloat32 } from './helpers/images.js';

const MODEL = join(FIXTURES, 'qwen3_vl-tiny/model');
const OPTIONS = { maxPixels: 32768 };
let tmp: string;
let tower: VisionTower;
let inputs: BulkInput[];

const input = (name: string): BulkInput => ({ path: join(tmp, 'in', name), root: join(tmp, 'in'), rel: name });

async function collect(gen: AsyncIterable<BulkOutcome>): Promise<BulkOutcome[]> {
  const out: BulkOutcome[] = [];
  for await (const o of gen) out.push(o);
  return out;
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'tessera-runner-'));
  mkdirSync(join(tmp, 'in', 'sub'), { recursive: true });
  copyFileSync(join(FIXTURES, 'images/astronaut.jpg'), join(tmp, 'in', 'a.jpg'));
  copyFileSync(join(FIXTURES, 'images/coffee.png'), join(tmp, 'in', 'sub', 'b.png'));
  writeFileSync(join(tmp, 'in', 'bad.png'), 'not an image');
  copyFileSync(join(FIXTURES, 'images/tiny.png'), join(tmp, 'in', 'c.png'));
  inputs = ['a.jpg', 'sub/b.png', 'bad.png', 'c.png'].map(input);
  tower = await VisionTower.open(MODEL);
});
afterAll(async () => {
  await tower?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('runBulk', () => {
  it('writes each good image once, fails the bad one alone, and a rerun skips what is up to date', async () => {
    const dir = join(tmp, 'out');
    const job = outputJob(tower, { dir, format: 'safetensors', model: MODEL, options: OPTIONS });
    const { manifest } = await openOutputDir(dir, { removeStale: true });
    const first = await collect(runBulk(tower, inputs, { outputs: job, manifest, encode: { ...OPTIONS, batch: 2 } }));
    await manifest.close();
    expect(first.map((o) => o.index).sort()).toEqual([0, 1, 2, 3]);
    const byIndex = (os: BulkOutcome[]) => os.slice().sort((x, y) => x.index - y.index);
    expect(byIndex(first).map((o) => o.status)).toEqual(['encoded', 'encoded', 'failed', 'encoded']);
    const bad = byIndex(first)[2]!;
    if (bad.status !== 'failed') throw new Error('unreachable');
    expect(bad.during).toBe('encode');
    expect(bad.error).toBeInstanceOf(TesseraError);
    expect(bad.error.code).toBe('ERR_IMAGE_DECODE');
    // The image's own message, not encodeMany's "input N" (its place in the feed).
    expect(bad.error.message).not.toMatch(/^input \d/);

    for (const o of first) {
      if (o.status !== 'encoded') continue;
      expect(o.output).toBe(join(dir, o.input.rel.replace(/\.[^.]+$/, '.safetensors')));
      expect(o.files).toEqual([o.output]);
      const direct = await tower.encode(o.input.path, OPTIONS);
      expect(asFloat32(readSafetensors(o.output!)['embeddings']!)).toEqual(direct.embeddings);
    }
    const lines = readFileSync(join(dir, 'manifest.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { input: string; status: string; output: string | null });
    expect(lines.map((l) => [l.input, l.status]).sort()).toEqual(first.map((o) => [o.input.path, o.status]).sort());
    expect(lines.find((l) => l.input.endsWith('b.png'))!.output).toBe('sub/b.safetensors');

    // Rerun: the good images are skipped with the first run's files and tokens; the bad one is retried.
    const second = byIndex(await collect(runBulk(tower, inputs, { outputs: job, encode: OPTIONS })));
    expect(second.map((o) => o.status)).toEqual(['skipped', 'skipped', 'failed', 'skipped']);
    for (const [k, o] of second.entries()) {
      const was = byIndex(first)[k]!;
      if (o.status !== 'skipped' || was.status !== 'encoded') continue;
      expect(o.files).toEqual(was.files);
      expect(o.tokens).toBe(was.result.tokens);
      expect(o.width).toBe(was.result.width);
    }
    // A changed input (a new mtime) is redone; force redoes everything.
    utimesSync(inputs[3]!.path, new Date(), new Date(Date.now() + 5000));
    const third = byIndex(await collect(runBulk(tower, inputs, { outputs: job, encode: OPTIONS })));
    expect(third.map((o) => o.status)).toEqual(['skipped', 'skipped', 'failed', 'encoded']);
    const forced = byIndex(await collect(runBulk(tower, inputs, { outputs: job, force: true, encode: OPTIONS })));
    expect(forced.map((o) => o.status)).toEqual(['encoded', 'encoded', 'failed', 'encoded']);
  });

  it('a loader that throws fails its input in the read step; an output that cannot be written fails in the write step', async () => {
    const dir = join(tmp, 'out-2');
    const job = outputJob(tower, { dir, format: 'npy', model: MODEL, options: OPTIONS });
    // The first image's output path is taken by a folder: its write fails, the others are written.
    mkdirSync(join(dir, 'a.embeddings.npy'), { recursive: true });
    const load: InputLoader = async (i, how) => {
      if (i.rel === 'c.png') throw new TesseraError('ERR_IO', `cannot fetch ${i.path}`);
      return loadFile(i, how);
    };
    const outcomes = await collect(runBulk(tower, [inputs[0]!, inputs[1]!, inputs[3]!], { outputs: job, load, encode: OPTIONS }));
    const byRel = new Map(outcomes.map((o) => [o.input.rel, o]));
    const a = byRel.get('a.jpg')!;
    const c = byRel.get('c.png')!;
    expect(a.status === 'failed' && [a.during, a.index]).toEqual(['write', 0]);
    expect(c.status === 'failed' && [c.during, c.error.code, c.index]).toEqual(['read', 'ERR_IO', 2]);
    const b = byRel.get('sub/b.png')!;
    expect(b.status).toBe('encoded');
    if (b.status !== 'encoded') return;
    // npy: one file per tensor, then the record; every one exists.
    expect(b.files!.at(-1)).toBe(join(dir, 'sub', 'b.tessera.json'));
    expect(readdirSync(join(dir, 'sub')).sort()).toEqual(b.files!.map((f) => f.slice(join(dir, 'sub').length + 1)).sort());
  });

  it('without outputs reports results and writes nothing', async () => {
    const before = readdirSync(tmp).sort();
    const outcomes = await collect(runBulk(tower, [inputs[0]!, inputs[2]!], { encode: OPTIONS }));
    expect(outcomes.map((o) => o.status).sort()).toEqual(['encoded', 'failed']);
    const enc = outcomes.find((o) => o.status === 'encoded')!;
    if (enc.status !== 'encoded') return;
    expect(enc.output).toBeUndefined();
    expect(enc.result.embeddings).toEqual((await tower.encode(inputs[0]!.path, OPTIONS)).embeddings);
    expect(readdirSync(tmp).sort()).toEqual(before);
  });
});
