// The CLI's one file writer (src/io/atomic-file.ts): the target is replaced whole or not at all,
// only a regular file (or nothing) is ever replaced, and every failure removes the temporary file
// and is a TesseraError.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TesseraError } from '../src/errors.js';
import { writeFileAtomic } from '../src/io/atomic-file.js';
import { SafetensorsWriter } from '../src/formats/safetensors-writer.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'tessera-atomic-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function failure(p: Promise<unknown>): Promise<TesseraError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(TesseraError);
    return e as TesseraError;
  }
  throw new Error('expected a TesseraError');
}

const leftovers = (d: string) => readdirSync(d).filter((f) => f.includes('.tessera-'));

describe('writeFileAtomic', () => {
  it('writes bytes, a string, or through a callback, and replaces a regular file whole', async () => {
    const target = join(dir, 'a.bin');
    await writeFileAtomic(target, new Uint8Array([1, 2, 3]));
    expect([...readFileSync(target)]).toEqual([1, 2, 3]);
    await writeFileAtomic(target, 'text');
    expect(readFileSync(target, 'utf8')).toBe('text');
    await writeFileAtomic(target, async (f) => {
      await f.write('part one, ');
      await f.write(new TextEncoder().encode('part two'));
    });
    expect(readFileSync(target, 'utf8')).toBe('part one, part two');
    expect(leftovers(dir)).toEqual([]);
  });

  it('refuses a directory, a FIFO and a device as the target, and creates nothing', async () => {
    const sub = join(dir, 'sub');
    mkdirSync(sub);
    let e = await failure(writeFileAtomic(sub, 'x'));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toContain(sub);
    expect(e.message).toMatch(/directory/);
    expect(statSync(sub).isDirectory()).toBe(true);

    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    e = await failure(writeFileAtomic(fifo, 'x'));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/FIFO/);
    expect(statSync(fifo).isFIFO()).toBe(true);

    e = await failure(writeFileAtomic('/dev/null', 'x'));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/\/dev\/null.*device/);
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
    expect(leftovers(dir)).toEqual([]);
    expect(leftovers(sub)).toEqual([]);
  });

  it('a failed write (ENOSPC) is ERR_IO, removes the temporary file and leaves the target as it was', async () => {
    const target = join(dir, 'keep.txt');
    writeFileSync(target, 'old');
    const e = await failure(
      writeFileAtomic(target, async (f) => {
        await f.write('new data');
        throw Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
      }),
    );
    expect(e.code).toBe('ERR_IO');
    expect(e.message).toContain(target);
    expect(e.message).toContain('ENOSPC');
    expect(readFileSync(target, 'utf8')).toBe('old');
    expect(leftovers(dir)).toEqual([]);
  });

  it('a directory that does not exist is ERR_IO naming the target', async () => {
    const target = join(dir, 'no', 'such', 'dir', 'out.bin');
    const e = await failure(writeFileAtomic(target, 'x'));
    expect(e.code).toBe('ERR_IO');
    expect(e.message).toContain(target);
  });
});

describe('SafetensorsWriter', () => {
  it('refuses a non-regular --out at create, before staging anything', async () => {
    const sub = join(dir, 'out-dir');
    mkdirSync(sub);
    const e = await failure(SafetensorsWriter.create(sub));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(leftovers(dir)).toEqual([]);
  });

  it('abort and finish leave no scratch or temporary file', async () => {
    const target = join(dir, 'x.safetensors');
    const w = await SafetensorsWriter.create(target);
    await w.add('t', [2], new Float32Array([1, 2]));
    await w.abort();
    expect(leftovers(dir)).toEqual([]);
    const v = await SafetensorsWriter.create(target);
    await v.add('t', [2], new Float32Array([1, 2]));
    await v.finish({ a: 'b' });
    expect(leftovers(dir)).toEqual([]);
    const buf = readFileSync(target);
    const n = Number(buf.readBigUInt64LE(0));
    expect(JSON.parse(buf.subarray(8, 8 + n).toString()).t).toEqual({ dtype: 'F32', shape: [2], data_offsets: [0, 8] });
    expect([...new Float32Array(buf.buffer.slice(buf.byteOffset + 8 + n, buf.byteOffset + 16 + n))]).toEqual([1, 2]);
  });
});
