// The output folder under hostile conditions, through the one job runner
// and the CLI as a user runs it: a FIFO at an image's output, at its record or at manifest.jsonl is
// refused at once (each FIFO test has a timeout, so a regression fails instead of hanging); a
// symbolic link at the manifest, an output or a record is never written through (the file outside the
// folder keeps its bytes); 235- and 250-character input names: the first is written (its temporary
// name fits), the second fails alone with ERR_INVALID_ARGUMENT and its manifest line while the run
// goes on and exits 1; an old manifest without its final newline, or larger than a string can hold
// (a sparse 600 MiB file), keeps this run's lines; damaged outputs (safetensors truncated or zeroed,
// a truncated .npy, a cut-off vLLM JSON, garbage in an SGLang JSON) are redone
// on resume and the summary says how many; stale temporary files of today's and earlier names go.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, truncateSync, writeFileSync, openSync, writeSync, closeSync, statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { openOutputDir, outputJob, removeStaleTemporaries, runBulk, type BulkInput, type BulkOutcome, type OutputFormat } from '../src/bulk/index.js';
import { TesseraError } from '../src/errors.js';
import { FIXTURES } from './helpers/fixtures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');
const MODEL = join(FIXTURES, 'qwen3_vl-tiny/model');
const OPTIONS = { maxPixels: 32768 };
/** A FIFO test that regresses blocks in open(2): this fails it instead of hanging the suite. */
const FIFO_TIMEOUT_MS = 60_000;
let tmp: string;
let tower: VisionTower;

const input = (name: string): BulkInput => ({ path: join(tmp, 'in', name), root: join(tmp, 'in'), rel: name });

async function run(dir: string, format: OutputFormat, names: string[]): Promise<BulkOutcome[]> {
  const job = outputJob(tower, { dir, format, model: MODEL, options: OPTIONS });
  const { manifest } = await openOutputDir(dir, { removeStale: true });
  const out: BulkOutcome[] = [];
  try {
    for await (const o of runBulk(tower, names.map(input), { outputs: job, manifest, encode: OPTIONS })) out.push(o);
    await manifest.compact(names.map((n) => input(n).path));
  } finally {
    await manifest.close();
  }
  return out.sort((a, b) => a.index - b.index);
}

const mkfifo = (path: string) => execFileSync('mkfifo', [path]);
const manifestLines = (dir: string) =>
  readFileSync(join(dir, 'manifest.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { input: string; status: string; error?: { code: string } });
const failure = (o: BulkOutcome) => {
  if (o.status !== 'failed') throw new Error(`expected a failure, got ${o.status}`);
  return o;
};

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'tessera-hostile-'));
  mkdirSync(join(tmp, 'in'), { recursive: true });
  copyFileSync(join(FIXTURES, 'images/tiny.png'), join(tmp, 'in', 'a.png'));
  copyFileSync(join(FIXTURES, 'images/coffee.png'), join(tmp, 'in', 'b.png'));
  tower = await VisionTower.open(MODEL);
});
afterAll(async () => {
  await tower?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('non-regular files in the output folder are refused without blocking', () => {
  it('a FIFO at an image output fails that image alone (safetensors: the output is its record)', { timeout: FIFO_TIMEOUT_MS }, async () => {
    const dir = join(tmp, 'fifo-out');
    mkdirSync(dir);
    mkfifo(join(dir, 'a.safetensors'));
    const [a, b] = await run(dir, 'safetensors', ['a.png', 'b.png']);
    const f = failure(a!);
    expect(f.during).toBe('write');
    expect(f.error.code).toBe('ERR_INVALID_ARGUMENT');
    expect(f.error.message).toMatch(/a\.safetensors.*FIFO/);
    expect(b!.status).toBe('encoded');
    expect(lstatSync(join(dir, 'a.safetensors')).isFIFO()).toBe(true);
    expect(manifestLines(dir).map((l) => l.status)).toEqual(['failed', 'encoded']);
  });

  it('a FIFO at a record (npy: stem.tessera.json) or at a sidecar output fails that image alone', { timeout: FIFO_TIMEOUT_MS }, async () => {
    const dir = join(tmp, 'fifo-record');
    mkdirSync(dir);
    mkfifo(join(dir, 'a.tessera.json'));
    let [a, b] = await run(dir, 'npy', ['a.png', 'b.png']);
    expect(failure(a!).error.message).toMatch(/a\.tessera\.json.*FIFO/);
    expect(b!.status).toBe('encoded');
    const dir2 = join(tmp, 'fifo-sidecar');
    mkdirSync(dir2);
    mkfifo(join(dir2, 'b.sglang.json'));
    [a, b] = await run(dir2, 'sglang', ['a.png', 'b.png']);
    expect(a!.status).toBe('encoded');
    expect(failure(b!).error.code).toBe('ERR_INVALID_ARGUMENT');
  });

  it('a FIFO at manifest.jsonl is refused before any image, ERR_INVALID_ARGUMENT', { timeout: FIFO_TIMEOUT_MS }, async () => {
    const dir = join(tmp, 'fifo-manifest');
    mkdirSync(dir);
    mkfifo(join(dir, 'manifest.jsonl'));
    const err = await openOutputDir(dir, { removeStale: true }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(TesseraError);
    expect((err as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
    expect((err as TesseraError).message).toMatch(/manifest\.jsonl is a FIFO/);
  });
});

describe('nothing is written through a symbolic link', () => {
  it('a manifest.jsonl linked to a file outside the folder is refused; that file keeps its bytes', async () => {
    const dir = join(tmp, 'link-manifest');
    mkdirSync(dir);
    const outside = join(tmp, 'outside-manifest.txt');
    writeFileSync(outside, 'precious\n');
    symlinkSync(outside, join(dir, 'manifest.jsonl'));
    const err = await openOutputDir(dir, { removeStale: true }).then(() => undefined, (e: unknown) => e);
    expect((err as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
    expect((err as TesseraError).message).toMatch(/symbolic link/);
    expect(readFileSync(outside, 'utf8')).toBe('precious\n');
  });

  it('an output or a record linked outside fails its image alone and the file outside keeps its bytes', async () => {
    const outside = join(tmp, 'outside-output.bin');
    writeFileSync(outside, 'precious\n');
    const dir = join(tmp, 'link-output');
    mkdirSync(dir);
    symlinkSync(outside, join(dir, 'a.safetensors'));
    const [a, b] = await run(dir, 'safetensors', ['a.png', 'b.png']);
    expect(failure(a!).error.message).toMatch(/a\.safetensors.*symbolic link/);
    expect(b!.status).toBe('encoded');
    const dir2 = join(tmp, 'link-record');
    mkdirSync(dir2);
    symlinkSync(outside, join(dir2, 'b.tessera.json'));
    const [a2, b2] = await run(dir2, 'vllm', ['a.png', 'b.png']);
    expect(a2!.status).toBe('encoded');
    expect(failure(b2!).error.code).toBe('ERR_INVALID_ARGUMENT');
    expect(readFileSync(outside, 'utf8')).toBe('precious\n');
    expect(lstatSync(join(dir, 'a.safetensors')).isSymbolicLink()).toBe(true);
  });
});

describe('long names', () => {
  const long235 = 'n'.repeat(231) + '.png';
  const long250 = 'm'.repeat(246) + '.png';

  it('a 235-character name is written (its temporary name fits); a 250-character one fails alone, ERR_INVALID_ARGUMENT', async () => {
    copyFileSync(join(FIXTURES, 'images/tiny.png'), join(tmp, 'in', long235));
    copyFileSync(join(FIXTURES, 'images/tiny.png'), join(tmp, 'in', long250));
    for (const format of ['safetensors', 'npy'] as const) {
      const dir = join(tmp, `long-${format}`);
      const [x, y, b] = await run(dir, format, [long235, long250, 'b.png']);
      expect(x!.status).toBe('encoded');
      const f = failure(y!);
      expect(f.during).toBe('write');
      expect(f.error.code).toBe('ERR_INVALID_ARGUMENT');
      expect(f.error.message).toMatch(/longer than the filesystem allows/);
      expect(b!.status).toBe('encoded');
      expect(manifestLines(dir).map((l) => l.status)).toEqual(['encoded', 'failed', 'encoded']);
      expect(readdirSync(dir).filter((n) => n.includes('tessera-tmp'))).toEqual([]);
    }
  });
});

describe('the manifest keeps every line', () => {
  it('an old manifest without its final newline gets one before this run appends', async () => {
    const dir = join(tmp, 'manifest-newline');
    mkdirSync(dir);
    writeFileSync(join(dir, 'manifest.jsonl'), JSON.stringify({ input: input('a.png').path, output: null, status: 'failed', error: { code: 'ERR_IO', message: 'old' } }));
    await run(dir, 'safetensors', ['a.png', 'b.png']);
    expect(manifestLines(dir).map((l) => [l.input, l.status])).toEqual([
      [input('a.png').path, 'encoded'],
      [input('b.png').path, 'encoded'],
    ]);
  });

  it('an old manifest larger than a string can hold (a sparse 600 MiB file) keeps this run\'s lines, and its own lines for this run\'s inputs', async () => {
    const dir = join(tmp, 'manifest-huge');
    mkdirSync(dir);
    const path = join(dir, 'manifest.jsonl');
    // An old line for a.png, then 600 MiB of hole (reads as NUL bytes: no newline in it), then a
    // line for c.png (not an input of this run). Nothing but the two lines takes disk space.
    const old = JSON.stringify({ input: input('a.png').path, output: 'a.safetensors', status: 'encoded', tokens: 1 }) + '\n';
    writeFileSync(path, old);
    truncateSync(path, 600 * 1024 * 1024);
    const fd = openSync(path, 'a');
    writeSync(fd, '\n' + JSON.stringify({ input: input('c.png').path, output: null, status: 'failed' }) + '\n');
    closeSync(fd);
    expect(statSync(path).size).toBeGreaterThan(512 * 1024 * 1024);
    const job = outputJob(tower, { dir, format: 'safetensors', model: MODEL, options: OPTIONS });
    const { manifest } = await openOutputDir(dir, { removeStale: false });
    // b.png only: a.png's line is the old one, kept since a.png is an input of this run.
    for await (const o of runBulk(tower, [input('b.png')], { outputs: job, manifest, encode: OPTIONS })) expect(o.status).toBe('encoded');
    await manifest.compact([input('a.png').path, input('b.png').path]);
    expect(manifestLines(dir).map((l) => [l.input, l.status])).toEqual([
      [input('a.png').path, 'encoded'],
      [input('b.png').path, 'encoded'],
    ]);
  });
});

describe('resume verifies what it trusts', () => {
  const damage: [string, OutputFormat, string, (p: string) => void][] = [
    ['a safetensors file with its data section truncated', 'safetensors', 'b.safetensors', (p) => truncateSync(p, statSync(p).size - 100)],
    ['a safetensors file with its data section zeroed (same size)', 'safetensors', 'b.safetensors', (p) => {
      const bytes = readFileSync(p);
      const start = 8 + Number(bytes.readBigUInt64LE(0));
      bytes.fill(0, start);
      writeFileSync(p, bytes);
    }],
    ['a truncated .npy', 'npy', 'b.embeddings.npy', (p) => truncateSync(p, statSync(p).size - 64)],
    ['a cut-off vLLM JSON', 'vllm', 'b.vllm.json', (p) => truncateSync(p, Math.floor(statSync(p).size / 2))],
    ['an SGLang JSON replaced by garbage', 'sglang', 'b.sglang.json', (p) => writeFileSync(p, 'garbage'.repeat(10))],
  ];
  for (const [what, format, file, hurt] of damage) {
    it(`${what} is redone, and said to be`, async () => {
      const dir = join(tmp, `damage-${format}-${file}-${what.length}`);
      await run(dir, format, ['a.png', 'b.png']);
      const good = readFileSync(join(dir, file));
      // Untouched, a rerun skips both.
      expect((await run(dir, format, ['a.png', 'b.png'])).map((o) => o.status)).toEqual(['skipped', 'skipped']);
      hurt(join(dir, file));
      expect(readFileSync(join(dir, file)).equals(good)).toBe(false);
      const [a, b] = await run(dir, format, ['a.png', 'b.png']);
      expect(a!.status).toBe('skipped');
      if (b!.status !== 'encoded') throw new Error(`expected b redone, got ${b!.status}`);
      expect(b!.redone).toContain(file);
      expect(readFileSync(join(dir, file)).equals(good)).toBe(true);
    });
  }
});

describe('stale temporary files', () => {
  it("today's short names and earlier versions' long names are both removed when their process is gone", async () => {
    const dir = join(tmp, 'stale');
    mkdirSync(dir);
    const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const dead = Number(child.stdout);
    const names = [
      `.tessera-tmp-${dead.toString(16).padStart(8, '0')}-0123abcd`,
      `.a.safetensors.tessera-tmp-${dead}-0123abcd`,
      `.tessera-tmp-${process.pid.toString(16).padStart(8, '0')}-0123abcd`, // a live process's: kept
      'a.safetensors',
    ];
    for (const n of names) writeFileSync(join(dir, n), 'x');
    expect(await removeStaleTemporaries(dir)).toBe(2);
    expect(readdirSync(dir).sort()).toEqual([names[2]!, 'a.safetensors'].sort());
  });
});

describe('tessera encode --out-dir (the CLI)', () => {
  beforeAll(() => {
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
  });
  const tessera = (...args: string[]) => {
    const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it('an unwritable name fails alone: the others are written, the manifest has its line and code, exit 1; a damaged output is redone and counted', async () => {
    const images = join(tmp, 'cli-in');
    mkdirSync(images);
    copyFileSync(join(FIXTURES, 'images/tiny.png'), join(images, 'm'.repeat(246) + '.png'));
    copyFileSync(join(FIXTURES, 'images/coffee.png'), join(images, 'z.png'));
    const out = join(tmp, 'cli-out');
    let r = tessera('encode', images, '--model', MODEL, '--max-pixels', '32768', '--out-dir', out);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/ERR_INVALID_ARGUMENT: .*longer than the filesystem allows/);
    expect(existsSync(join(out, 'z.safetensors'))).toBe(true);
    expect(manifestLines(out).map((l) => [l.status, l.error?.code])).toEqual([['failed', 'ERR_INVALID_ARGUMENT'], ['encoded', undefined]]);
    // Resume with z's output zeroed past its header: redone, and the summary says so.
    const z = join(out, 'z.safetensors');
    const bytes = readFileSync(z);
    bytes.fill(0, 8 + Number(bytes.readBigUInt64LE(0)));
    writeFileSync(z, bytes);
    r = tessera('encode', join(images, 'z.png'), '--model', MODEL, '--max-pixels', '32768', '--out-dir', out);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1 damaged output redone/);
    expect(r.stderr).toMatch(/z\.png: its output was damaged/);
  });

  it('a FIFO or a link to a file outside at manifest.jsonl: refused before any image, exit 2, nothing written outside', { timeout: FIFO_TIMEOUT_MS * 2 }, () => {
    const image = join(tmp, 'in', 'a.png');
    const fifoDir = join(tmp, 'cli-fifo');
    mkdirSync(fifoDir);
    mkfifo(join(fifoDir, 'manifest.jsonl'));
    // spawnSync's own timeout kills a CLI that regressed into blocking (status null: fails the test).
    let r = spawnSync(process.execPath, [MAIN, 'encode', image, '--model', MODEL, '--max-pixels', '32768', '--out-dir', fifoDir], { encoding: 'utf8', timeout: FIFO_TIMEOUT_MS });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/manifest\.jsonl is a FIFO/);
    expect(readdirSync(fifoDir)).toEqual(['manifest.jsonl']);
    const linkDir = join(tmp, 'cli-link');
    mkdirSync(linkDir);
    const outside = join(tmp, 'outside-cli.txt');
    writeFileSync(outside, 'precious\n');
    symlinkSync(outside, join(linkDir, 'manifest.jsonl'));
    r = spawnSync(process.execPath, [MAIN, 'encode', image, '--model', MODEL, '--max-pixels', '32768', '--out-dir', linkDir], { encoding: 'utf8', timeout: FIFO_TIMEOUT_MS });
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/manifest\.jsonl is a symbolic link/);
    expect(readFileSync(outside, 'utf8')).toBe('precious\n');
  });
});
