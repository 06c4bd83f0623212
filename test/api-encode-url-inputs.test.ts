// An image given as a URL string: a `file:` URL names a file, as Node's fs takes it, and is read like
// its path; any other URL is refused with ERR_INVALID_ARGUMENT saying it is a URL and that encode reads
// files and bytes (fetching is the fleet's), not as a missing file. A file whose path merely looks like
// a URL is still read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TesseraError, VisionTower } from '../src/index.js';
import { collectInputs } from '../src/bulk/index.js';
import { FIXTURES } from './helpers/fixtures.js';

const IMAGE = join(FIXTURES, 'images', 'tiny.png');

describe('encode with a URL string', () => {
  let tower: VisionTower;
  let work: string;
  beforeAll(async () => {
    tower = await VisionTower.open(join(FIXTURES, 'qwen3_5-tiny', 'model'), { backend: 'cpu' });
    work = mkdtempSync(join(tmpdir(), 'tessera-url-input-'));
  });
  afterAll(async () => {
    await tower?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('a file: URL is read as the file it names, bit-identical to its path', async () => {
    const byPath = await tower.encode(IMAGE);
    const byUrl = await tower.encode(pathToFileURL(IMAGE).href);
    expect(Buffer.from(byUrl.embeddings.buffer).equals(Buffer.from(byPath.embeddings.buffer))).toBe(true);
    expect((await tower.preprocess(pathToFileURL(IMAGE).href)).pixelValues).toEqual((await tower.preprocess(IMAGE)).pixelValues);
  });

  it('a file: URL with escapes names the decoded path', async () => {
    const spaced = join(work, 'a page #1.png');
    copyFileSync(IMAGE, spaced);
    const url = pathToFileURL(spaced).href;
    expect(url).toContain('%20');
    expect((await tower.encode(url)).tokens).toBe((await tower.encode(IMAGE)).tokens);
  });

  for (const url of ['http://example.com/page.png', 'https://example.com/a.jpg?x=1', 's3://bucket/key.png']) {
    it(`${url.split(':')[0]}: ERR_INVALID_ARGUMENT saying it is a URL and that encode reads files and bytes`, async () => {
      const e = await tower.encode(url).then(() => null, (err: unknown) => err);
      expect(e).toBeInstanceOf(TesseraError);
      expect((e as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
      expect((e as TesseraError).message).toContain(`${url} is a URL`);
      expect((e as TesseraError).message).toMatch(/reads image files .* and bytes/);
      expect((e as TesseraError).message).not.toMatch(/ENOENT|cannot open/);
    });
  }

  it('a file: URL of another host is ERR_INVALID_ARGUMENT naming it', async () => {
    const e = await tower.encode('file://otherhost/share/a.png').then(() => null, (err: unknown) => err);
    expect((e as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
    expect((e as TesseraError).message).toContain('file://otherhost/share/a.png');
  });

  it('a file: URL of a missing file is the missing file (ERR_IO), naming its path', async () => {
    const missing = join(work, 'gone.png');
    const e = await tower.encode(pathToFileURL(missing).href).then(() => null, (err: unknown) => err);
    expect((e as TesseraError).code).toBe('ERR_IO');
    expect((e as TesseraError).message).toContain(missing);
  });

  it('a real file whose relative path looks like a URL is still read', async () => {
    const dir = join(work, 'http:', 'example.com');
    mkdirSync(dir, { recursive: true });
    copyFileSync(IMAGE, join(dir, 'p.png'));
    const cwd = process.cwd();
    process.chdir(work);
    try {
      expect((await tower.encode('http://example.com/p.png')).tokens).toBe((await tower.encode(IMAGE)).tokens);
    } finally {
      process.chdir(cwd);
    }
  });

  it('encodeBatch gives the URL its own error and encodes the others', async () => {
    const out = await tower.encodeBatch([IMAGE, 'http://example.com/x.png']);
    expect(out[0]).not.toBeInstanceOf(Error);
    expect(out[1]).toBeInstanceOf(TesseraError);
    expect((out[1] as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
  });
});

describe('tessera encode\'s inputs (collectInputs) with URL strings', () => {
  it('a file: URL is its file; another URL is ERR_INVALID_ARGUMENT saying it is a URL, before any work', async () => {
    const got = await collectInputs([pathToFileURL(IMAGE).href]);
    expect(got.map((i) => i.path)).toEqual([IMAGE]);
    const e = await collectInputs([IMAGE, 'http://example.com/a.png']).then(() => null, (err: unknown) => err);
    expect((e as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
    expect((e as TesseraError).message).toContain('http://example.com/a.png is a URL');
    expect((e as TesseraError).message).not.toContain('does not exist');
  });
});
