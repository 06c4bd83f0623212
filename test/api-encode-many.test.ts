// tower.encodeMany: an async iterator over images (array, iterable or async iterable) that yields
// each result or its TesseraError with the input it belongs to, as its group finishes; results
// equal encode() bit for bit; per-image encodeMs is the group's time shared by patch rows; abort
// rejects the pending next(); bad arguments are refused at the call. And the CLI's input
// collection (src/bulk/inputs.ts): folders, extensions in any case, --exclude, '-' lists, order.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError, VisionTower } from '../src/index.js';
import { collectInputs } from '../src/bulk/inputs.js';
import { FIXTURES } from './helpers/fixtures.js';

const IMAGES = join(FIXTURES, 'images');
const files = ['coffee.png', 'tiny.png', 'rocket_thin.png', 'chelsea_exif6.jpg', 'camera_gray.png'].map((f) => join(IMAGES, f));
const OPTS = { maxPixels: 32768 };

let tower: VisionTower;
beforeAll(async () => {
  tower = await VisionTower.open(join(FIXTURES, 'qwen3_vl-tiny/model'), { backend: 'cpu' });
});
afterAll(() => tower?.close());

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe('encodeMany', () => {
  it('yields every input once, with its index and input; results equal encode() bit for bit; a bad input is its own TesseraError', async () => {
    const missing = join(IMAGES, 'no-such-image.png');
    const inputs = [files[0]!, missing, ...files.slice(1)];
    const seen = new Map<number, unknown>();
    for await (const item of tower.encodeMany(inputs, { ...OPTS, batch: 2 })) {
      expect(seen.has(item.index)).toBe(false);
      expect(item.input).toBe(inputs[item.index]);
      seen.set(item.index, item.result ?? item.error);
    }
    expect([...seen.keys()].sort()).toEqual([0, 1, 2, 3, 4, 5]);
    const bad = seen.get(1) as TesseraError;
    expect(bad).toBeInstanceOf(TesseraError);
    expect(bad.code).toBe('ERR_IO');
    expect((bad.cause as NodeJS.ErrnoException).code).toBe('ENOENT');
    expect(bad.message).toContain('no-such-image.png');
    // Named by its path, not by its place in the batch.
    expect(bad.message).not.toMatch(/input \d/);
    for (const i of [0, 2, 3, 4, 5]) {
      const got = seen.get(i) as Awaited<ReturnType<VisionTower['encode']>>;
      const one = await tower.encode(inputs[i]!, OPTS);
      expect(bits(got.embeddings).equals(bits(one.embeddings))).toBe(true);
      expect(got.deepstack!.map(bits).every((d, k) => d.equals(bits(one.deepstack![k]!)))).toBe(true);
      expect(got.grid).toEqual(one.grid);
    }
  });

  it('takes an async iterable (a service streaming its inputs) and Buffers', async () => {
    const { readFileSync } = await import('node:fs');
    async function* stream() {
      for (const f of files.slice(0, 3)) yield readFileSync(f);
    }
    const tokens: number[] = [];
    for await (const item of tower.encodeMany(stream(), { ...OPTS, batch: 2 })) tokens[item.index] = item.result!.tokens;
    expect(tokens).toEqual([24, 20, 20]);
  });

  it("shares a group's encode time among its images in proportion to their patch rows", async () => {
    const results = [];
    for await (const item of tower.encodeMany(files.slice(0, 3), { ...OPTS, batch: 3 })) results.push(item.result!);
    const group = results[0]!.timings.groupEncodeMs!;
    expect(results.every((r) => r.timings.groupEncodeMs === group && r.timings.groupImages === 3)).toBe(true);
    const patches = results.map((r) => r.grid!.reduce((a, g) => a + g.t * g.h * g.w, 0));
    const total = patches.reduce((a, b) => a + b, 0);
    results.forEach((r, k) => expect(r.timings.encodeMs).toBeCloseTo((group * patches[k]!) / total, 9));
  });

  it('stops early without hanging (break), and an abort rejects the pending next() with ERR_ABORTED', async () => {
    let n = 0;
    for await (const item of tower.encodeMany(files, { ...OPTS, batch: 1 })) {
      expect(item.result).toBeDefined();
      if (++n === 2) break;
    }
    expect(n).toBe(2);
    const ac = new AbortController();
    const got: number[] = [];
    const run = (async () => {
      for await (const item of tower.encodeMany(files, { ...OPTS, batch: 1, signal: ac.signal })) {
        got.push(item.index);
        ac.abort('stop');
      }
    })();
    await expect(run).rejects.toMatchObject({ code: 'ERR_ABORTED', cause: 'stop' });
    expect(got).toEqual([0]);
    // The tower is usable afterwards.
    expect((await tower.encode(files[1]!, OPTS)).tokens).toBe(20);
  });

  it('refuses bad arguments at the call, naming them', () => {
    expect(() => tower.encodeMany('a.png' as never)).toThrow(/array, iterable or async iterable/);
    expect(() => tower.encodeMany(files, { batch: 0 })).toThrow(/encodeMany options: option 'batch'/);
    expect(() => tower.encodeMany(files, { maxSoftTokens: 280 } as never)).toThrow(/Gemma 4 option/);
    expect(() => tower.encodeMany(files, { bacth: 2 } as never)).toThrow(/did you mean 'batch'/);
  });
});

describe('bulk inputs', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'tessera-inputs-'));
    for (const p of ['b.png', 'a.JPG', 'sub/z.webp', 'sub/deeper/y.TIFF', 'sub/notes.txt', 'skip/x.png', 'c.jpeg.bak', '.hidden.png'])
      mkdirSync(join(dir, p, '..'), { recursive: true }), writeFileSync(join(dir, p), 'x');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('walks folders recursively: image extensions in any case, sorted by path, roots and relative paths kept', async () => {
    const got = await collectInputs([dir]);
    expect(got.map((i) => i.rel)).toEqual(['.hidden.png', 'a.JPG', 'b.png', 'skip/x.png', 'sub/deeper/y.TIFF', 'sub/z.webp']);
    expect(got.every((i) => i.root === dir && i.path === join(dir, ...i.rel.split('/')))).toBe(true);
  });

  it('--exclude: a pattern without / matches base names, a matching folder is not entered', async () => {
    const got = await collectInputs([dir], { exclude: ['skip', '*.webp', '.*'] });
    expect(got.map((i) => i.rel)).toEqual(['a.JPG', 'b.png', 'sub/deeper/y.TIFF']);
    expect((await collectInputs([dir], { exclude: ['sub/**'] })).map((i) => i.rel)).toEqual(['.hidden.png', 'a.JPG', 'b.png', 'skip/x.png']);
  });

  it("'-' reads a list (files and folders, CRLF or LF, blank lines ignored); arguments keep their order; duplicates are taken once", async () => {
    const stdin = Readable.from([`${join(dir, 'sub')}\r\n\n${join(dir, 'b.png')}\n`]);
    const got = await collectInputs([join(dir, 'b.png'), '-', join(dir, 'a.JPG')], { stdin, cwd: dir });
    expect(got.map((i) => i.rel)).toEqual(['b.png', 'deeper/y.TIFF', 'z.webp', 'a.JPG']);
    // An explicit file inside the current folder keeps its path relative to it; a named file is taken whatever its extension.
    const named = await collectInputs(['sub/notes.txt'], { cwd: dir });
    expect(named).toEqual([{ path: 'sub/notes.txt', root: dir, rel: 'sub/notes.txt' }]);
    await expect(collectInputs(['-'])).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
  });
});
