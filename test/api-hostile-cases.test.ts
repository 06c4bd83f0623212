// An adversarial run's cases (hostile files, arguments and environments), one test each, through the public API and the CLI: every one ends in a
// TesseraError with a code and a message naming the culprit, without hanging (each case is bounded
// by refusalOf's timeout, a hang guard rather than a timing assertion) and, where the case was a
// runaway read, without memory growth. Test names state the case.
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as cli } from '../src/cli/main.js';
import type { CliIo } from '../src/cli/io.js';
import { TesseraError, VisionTower, type EncodeResult } from '../src/index.js';
import { FIXTURES } from './helpers/fixtures.js';
import { refusalOf } from './helpers/fuzz.js';
import { pngClaiming } from './helpers/images.js';
import { copyModel, readRaw, writeRaw } from './helpers/model-copy.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const QWEN35 = join(FIXTURES, 'qwen3_5-tiny', 'model'); // two shards
const QWENVL = join(FIXTURES, 'qwen3_vl-tiny', 'model'); // one model.safetensors
const MMPROJ = join(FIXTURES, 'gemma4-tiny', 'mmproj-gemma4v-f16.gguf');
const IMAGE = join(FIXTURES, 'images', 'coffee.png');
const SHARD = 'model-00001-of-00002.safetensors';
const PATCH_VALUES = 1536; // Qwen: 3 x 2 x 16 x 16 values per patch row

let scratch: string;
let qwen: VisionTower;
let vl: VisionTower;
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'tessera-hostile-'));
  qwen = await VisionTower.open(QWEN35, { backend: 'cpu' });
  vl = await VisionTower.open(QWENVL, { backend: 'cpu' });
});
afterAll(async () => {
  await qwen?.close();
  await vl?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const fifo = (path: string) => (execFileSync('mkfifo', [path]), path);
/** A copy of `model` with `file` replaced by what `put` makes at its path. */
function modelWith(model: string, file: string, put: (path: string) => void): string {
  const dir = copyModel(model);
  unlinkSync(join(dir, file));
  put(join(dir, file));
  return dir;
}
async function opened(dir: string, options = {}) {
  const t = await VisionTower.open(dir, { backend: 'cpu', ...options });
  await t.close();
}
/** RSS growth across fn, in bytes: a runaway read shows as gigabytes. */
async function growth(fn: () => Promise<unknown>): Promise<number> {
  const before = process.memoryUsage().rss;
  await fn();
  return process.memoryUsage().rss - before;
}
const MiB = 1024 * 1024;

/** A GGUF fixture copy whose u32 metadata `key` holds `value`. */
function ggufWithU32(key: string, value: number): string {
  const b = Buffer.from(readFileSync(MMPROJ));
  const at = b.indexOf(Buffer.from(key, 'utf8'));
  expect(b.readUInt32LE(at + key.length)).toBe(4); // gguf_type U32
  b.writeUInt32LE(value, at + key.length + 4);
  const path = join(mkdtempSync(join(scratch, 'gguf-')), 'mmproj.gguf');
  writeFileSync(path, b);
  return path;
}

/** A safetensors header edit on a copy of the single-file fixture. */
function headerEdit(edit: (text: string, header: Record<string, any>) => string): string {
  const dir = copyModel(QWENVL);
  const f = join(dir, 'model.safetensors');
  const { header, data } = readRaw(f);
  writeRaw(f, edit(JSON.stringify(header), header), data);
  return dir;
}
const firstTensor = (h: Record<string, any>) => Object.keys(h).find((k) => k !== '__metadata__')!;

function captureIo(): CliIo & { text(): string } {
  const lines: string[] = [];
  return { out: (l) => lines.push(l), err: (l) => lines.push(l), progress: () => undefined, tty: false, columns: 80, text: () => lines.join('\n') };
}
const leftovers = (d: string) => readdirSync(d).filter((f) => f.includes('.tessera-'));

describe('hangs and runaway memory', () => {
  for (const dev of ['/dev/zero', '/dev/urandom']) {
    it(`an image path that is ${dev}: ERR_IMAGE_DECODE naming it, nothing read`, async () => {
      let e: TesseraError | undefined;
      const grew = await growth(async () => (e = await refusalOf(dev, () => qwen.encode(dev))));
      expect(e!.code).toBe('ERR_IMAGE_DECODE');
      expect(e!.message).toMatch(new RegExp(`${dev}.* is a device, not a regular file`));
      expect(grew).toBeLessThan(64 * MiB);
    });
  }
  it('a FIFO given as an image', async () => {
    const path = fifo(join(scratch, 'image.fifo'));
    const e = await refusalOf('fifo image', () => qwen.encode(path));
    expect(e.code).toBe('ERR_IMAGE_DECODE');
    expect(e.message).toContain(`${path} is a FIFO`);
  });
  it('a FIFO given as a weight file (model.safetensors)', async () => {
    const dir = modelWith(QWENVL, 'model.safetensors', fifo);
    const e = await refusalOf('fifo weights', () => opened(dir));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toContain(`${join(dir, 'model.safetensors')} is a FIFO`);
  });
  it('a FIFO given as a shard', async () => {
    const dir = modelWith(QWEN35, SHARD, fifo);
    const e = await refusalOf('fifo shard', () => opened(dir));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toContain(`${join(dir, SHARD)} is a FIFO`);
  });
  it('a FIFO given as the model path (a GGUF file), or as config.json', async () => {
    const path = fifo(join(scratch, 'model.fifo'));
    let e = await refusalOf('fifo model', () => opened(path));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toContain(path);
    const dir = modelWith(QWENVL, 'config.json', fifo);
    e = await refusalOf('fifo config', () => opened(dir));
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toContain(`${join(dir, 'config.json')} is a FIFO`);
  });
  it('a weight file that is a link to /dev/zero', async () => {
    const dir = modelWith(QWENVL, 'model.safetensors', (p) => symlinkSync('/dev/zero', p));
    const e = await refusalOf('zero weights', () => opened(dir));
    expect(e.code).toBe('ERR_MODEL_FORMAT');
    expect(e.message).toMatch(/model\.safetensors is a device/);
  });
});

describe("the CLI writes only regular files (--out)", () => {
  it('--out naming a device file is refused and the device stays a device', async () => {
    // As root, a device node of our own (replacing /dev/null would break the machine if the
    // refusal failed); otherwise /dev/null, which no one can replace without root anyway.
    let dev = '/dev/null';
    try {
      execFileSync('mknod', [join(scratch, 'null'), 'c', '1', '3'], { stdio: 'ignore' });
      dev = join(scratch, 'null');
    } catch {
      /* not root */
    }
    const io = captureIo();
    expect(await cli(['encode', IMAGE, '--model', QWEN35, '--out', dev], io)).toBe(2);
    expect(io.text()).toMatch(new RegExp(`ERR_INVALID_ARGUMENT: output ${dev} exists and is a device`));
    expect(statSync(dev).isCharacterDevice()).toBe(true);
  });
  it('--out naming an existing directory is refused and leaves no temporary file', async () => {
    const out = mkdtempSync(join(scratch, 'outdir-'));
    const io = captureIo();
    expect(await cli(['encode', IMAGE, '--model', QWEN35, '--out', out], io)).toBe(2);
    expect(io.text()).toMatch(/exists and is a directory/);
    expect(readdirSync(out)).toEqual([]);
    expect(leftovers(scratch)).toEqual([]);
  });
  // A really full disk: a 64 KiB tmpfs mounted in a private mount namespace (unshare -rm: no root
  // needed where user namespaces are enabled), the CLI run inside it from a private build.
  const unshare = spawnSync('unshare', ['-rm', 'sh', '-c', 'd=$(mktemp -d) && mount -t tmpfs -o size=64k none "$d"'], { encoding: 'utf8' });
  it.skipIf(unshare.status !== 0)(
    `a full disk is ERR_IO (not ERR_INTERNAL), and the partial file and temporaries are removed${unshare.status !== 0 ? ' (skipped: unshare -rm cannot mount a tmpfs here)' : ''}`,
    () => {
      const build = mkdtempSync(join(tmpdir(), 'tessera-build-'));
      try {
        copyFileSync(join(ROOT, 'package.json'), join(build, 'package.json'));
        symlinkSync(join(ROOT, 'node_modules'), join(build, 'node_modules'));
        symlinkSync(join(ROOT, 'build'), join(build, 'build'));
        execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json'), '--outDir', join(build, 'dist')]);
        const script =
          'd=$(mktemp -d) && mount -t tmpfs -o size=64k none "$d" || exit 99; ' +
          '"$0" "$1" encode "$2" "$2" "$2" --model "$3" --stages --out "$d/out.safetensors"; code=$?; echo "LEFT:$(ls -A "$d")"; exit $code';
        const r = spawnSync('unshare', ['-rm', 'sh', '-c', script, process.execPath, join(build, 'dist', 'cli', 'main.js'), IMAGE, QWEN35], { encoding: 'utf8', timeout: 120_000 });
        expect(r.stderr).toMatch(/ERR_IO: cannot write .*out\.safetensors: ENOSPC/);
        expect(r.stderr).not.toMatch(/ERR_INTERNAL/);
        expect(r.status).toBe(1);
        expect(r.stdout).toMatch(/^LEFT:$/m);
      } finally {
        rmSync(build, { recursive: true, force: true });
      }
    },
  );
});

describe('errors that are not TesseraErrors', () => {
  it('encodePixels with a null or missing grid', async () => {
    const pixelValues = new Float32Array(4 * PATCH_VALUES);
    for (const input of [{ pixelValues, grid: null }, { pixelValues }]) {
      const e = await refusalOf('grid', () => vl.encodePixels(input as never));
      expect(e.code).toBe('ERR_INVALID_ARGUMENT');
      expect(e.message).toMatch(/'grid'/);
    }
  });
  it('a safetensors dtype nested 100,000 deep', async () => {
    const dir = headerEdit((text, h) => text.replace(JSON.stringify(h[firstTensor(h)].dtype), '['.repeat(100_000) + ']'.repeat(100_000)));
    const e = await refusalOf('deep dtype', () => opened(dir));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/model\.safetensors: header: nested deeper than 16 levels/);
  });
  it('a directory where a weight file or a shard should be', async () => {
    for (const [model, file] of [[QWENVL, 'model.safetensors'], [QWEN35, SHARD]] as const) {
      const dir = modelWith(model, file, (p) => mkdirSync(p));
      const e = await refusalOf(file, () => opened(dir));
      expect(e.code).toBe('ERR_MODEL_FORMAT');
      expect(e.message).toContain(`${join(dir, file)} is a directory`);
    }
  });
  it('a signal that is not an AbortSignal', async () => {
    const e = await refusalOf('signal', () => qwen.encode(IMAGE, { signal: { aborted: false } as never }));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/option 'signal' must be an AbortSignal/);
  });
  it('opts = null, for every call that takes options', async () => {
    const pixels = { pixelValues: new Float32Array(4 * PATCH_VALUES), grid: { t: 1, h: 2, w: 2 } };
    const calls: [string, () => Promise<unknown>][] = [
      ['VisionTower.open', () => VisionTower.open(QWENVL, null as never)],
      ['encode', () => qwen.encode(IMAGE, null as never)],
      ['encodeBatch', () => qwen.encodeBatch([IMAGE], null as never)],
      ['encodePixels', () => vl.encodePixels(pixels, null as never)],
      ['preprocess', () => qwen.preprocess(IMAGE, null as never)],
      ['estimate', () => qwen.estimate(IMAGE, null as never)],
    ];
    for (const [name, call] of calls) {
      const e = await refusalOf(name, call);
      expect(e.code, name).toBe('ERR_INVALID_ARGUMENT');
      expect(e.message, name).toMatch(/options must be an object, not null/);
    }
  });
  it('a model path that is a number or undefined', async () => {
    for (const path of [42, undefined]) {
      const e = await refusalOf(String(path), () => VisionTower.open(path as never));
      expect(e.code).toBe('ERR_INVALID_ARGUMENT');
      expect(e.message).toMatch(new RegExp(`model path must be a non-empty string, not ${path}`));
    }
  });
});

describe('silently accepted, now refused', () => {
  it("options of the wrong type (stages: 'yes', checkFinite: 'no', onProgress: 5) name the option", async () => {
    for (const [key, value] of [['stages', 'yes'], ['checkFinite', 'no'], ['onProgress', 5]] as const) {
      const e = await refusalOf(key, () => qwen.encode(IMAGE, { [key]: value }));
      expect(e.code).toBe('ERR_INVALID_ARGUMENT');
      expect(e.message).toContain(`option '${key}'`);
    }
  });
  it('maxSoftTokens on a Qwen tower', async () => {
    const e = await refusalOf('maxSoftTokens', () => qwen.encode(IMAGE, { maxSoftTokens: 280 }));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/'maxSoftTokens' is a Gemma 4 option/);
  });
  it('a misspelt key gets a did-you-mean', async () => {
    let e = await refusalOf('minPixel', () => qwen.encode(IMAGE, { minPixel: 4096 } as never));
    expect(e.message).toMatch(/unknown option 'minPixel' \(did you mean 'minPixels'\?\)/);
    e = await refusalOf('residncy', () => VisionTower.open(QWENVL, { residncy: 'stream' } as never));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/did you mean 'residency'/);
  });
  it('minPixels > maxPixels in options', async () => {
    const e = await refusalOf('min > max', () => qwen.encode(IMAGE, { minPixels: 200_000, maxPixels: 100_000 }));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/option 'minPixels' 200000 is above maxPixels 100000/);
  });
  it('minPixels > maxPixels in preprocessor_config.json (refused at open)', async () => {
    const dir = copyModel(QWEN35);
    const p = join(dir, 'preprocessor_config.json');
    writeFileSync(p, JSON.stringify({ ...JSON.parse(readFileSync(p, 'utf8')), size: { shortest_edge: 200_000, longest_edge: 100_000 } }));
    const e = await refusalOf('config min > max', () => opened(dir));
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(/field 'size\.shortest_edge': 200000 is above size\.longest_edge 100000/);
  });
  it('a grid t of 2^32 + 1', async () => {
    const e = await refusalOf('t', () => vl.encodePixels({ pixelValues: new Float32Array(4 * PATCH_VALUES), grid: { t: 2 ** 32 + 1, h: 2, w: 2 } }));
    expect(e.code).toBe('ERR_INVALID_ARGUMENT');
    expect(e.message).toMatch(/'grid\.t'.*4294967297/);
  });
  it('a duplicate tensor key in a safetensors header', async () => {
    const dir = headerEdit((text, h) => text.replace('{', `{${JSON.stringify(firstTensor(h))}:${JSON.stringify(h[firstTensor(h)])},`));
    const e = await refusalOf('duplicate', () => opened(dir));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/model\.safetensors: header: key '.+' appears twice/);
  });
  it('GGUF alignment 1, and an alignment that is not where the data is', async () => {
    let e = await refusalOf('alignment 1', () => opened(ggufWithU32('general.alignment', 1)));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/general\.alignment 1 is not a power of two from 8/);
    // 8 is a legal alignment, but not this file's (32): every tensor would be read 24 bytes early.
    e = await refusalOf('alignment 8', () => opened(ggufWithU32('general.alignment', 8)));
    expect(e.code).toBe('ERR_WEIGHTS_CORRUPT');
    expect(e.message).toMatch(/24 bytes follow the last tensor .*alignment 8/);
  });
  it("a GGUF projection_dim that contradicts the tensors", async () => {
    const e = await refusalOf('projection_dim', () => opened(ggufWithU32('clip.vision.projection_dim', 99)));
    expect(e.code).toBe('ERR_TENSOR_SHAPE');
    expect(e.message).toMatch(/'mm\.input_projection\.weight' projects to 96, but clip\.vision\.projection_dim is 99/);
  });
  it('a JPEG whose header claims 9000x9000 but holds 512x512 data', async () => {
    const jpeg = await sharp({ create: { width: 512, height: 512, channels: 3, background: { r: 90, g: 140, b: 200 } } }).jpeg().toBuffer();
    const sof = jpeg.indexOf(Buffer.from([0xff, 0xc0]));
    jpeg.writeUInt16BE(9000, sof + 5); // height, then width
    jpeg.writeUInt16BE(9000, sof + 7);
    let e: TesseraError | undefined;
    const grew = await growth(async () => (e = await refusalOf('jpeg', () => qwen.encode(jpeg))));
    expect(e!.code).toBe('ERR_IMAGE_DECODE');
    expect(e!.message).toMatch(/the header says 9000x9000 but the pixel data ends early/);
    expect(grew).toBeLessThan(256 * MiB); // 9000 x 9000 x 3 would be 232 MiB of pixels
  });
  it('an SVG file (Pillow cannot open SVG, so it can never match HF)', async () => {
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><rect width="64" height="64" fill="red"/></svg>');
    const path = join(scratch, 'drawing.svg');
    writeFileSync(path, svg);
    const e = await refusalOf('svg', () => qwen.encode(path));
    expect(e.code).toBe('ERR_IMAGE_DECODE');
    expect(e.message).toContain(path);
    expect(e.message).toMatch(/SVG is a vector format that Pillow .* cannot open/);
  });
});

describe('messages that name the culprit', () => {
  it("a preprocessor patch_size that contradicts config.json blames the patch size, not the pixel count", async () => {
    const dir = copyModel(QWEN35);
    const p = join(dir, 'preprocessor_config.json');
    writeFileSync(p, JSON.stringify({ ...JSON.parse(readFileSync(p, 'utf8')), patch_size: 14 }));
    const e = await refusalOf('patch_size', () => opened(dir));
    expect(e.code).toBe('ERR_CONFIG_INVALID');
    expect(e.message).toMatch(/preprocessor config's patch_size 14 contradicts the tower's patch_size 16/);
    expect(e.message).not.toMatch(/pixelValues|length/);
  });
  it('minPixels: 1e12 names minPixels, not an internal option', async () => {
    const e = await refusalOf('1e12', () => qwen.encode(IMAGE, { minPixels: 1e12, maxPixels: 2e12 }));
    expect(e.code).toBe('ERR_IMAGE_TOO_LARGE');
    expect(e.message).toMatch(/sized by minPixels 1000000000000/);
    expect(e.message).not.toMatch(/target(Width|Height)/);
  });
  it('a decompression-bomb refusal states the size and the limit', async () => {
    const bomb = pngClaiming(12000, 12000, 1);
    const e = await refusalOf('bomb', () => qwen.encode(bomb));
    expect(e.code).toBe('ERR_IMAGE_TOO_LARGE');
    expect(e.message).toMatch(/12000x12000 = 144000000 pixels exceeds the limit of 100000000 \(maxInputPixels\)/);
    const f = await refusalOf('limit', () => qwen.encode(IMAGE, { maxInputPixels: 1000 }));
    expect(f.message).toMatch(/600x400 = 240000 pixels exceeds the limit of 1000/);
  });
});

describe('memory instead of a refusal', () => {
  it('minPixels: 1e9 is refused before any work, from the estimate', async () => {
    const big = await refusalOf('1e9', () => qwen.encode(IMAGE, { minPixels: 1e9, maxPixels: 1e9 }));
    // Refused from the estimate, whichever bound the machine sets (its memory here, no budget given).
    expect(['ERR_OUT_OF_MEMORY', 'ERR_IMAGE_TOO_LARGE']).toContain(big.code);
    expect(big.message).toMatch(/sized by minPixels 1000000000, maxPixels 1000000000\) needs \d+ patches/);
    // With a budget the refusal is the same on every machine.
    const budgeted = await VisionTower.open(QWEN35, { backend: 'cpu', memoryBudget: 1024 * MiB });
    try {
      let e: TesseraError | undefined;
      const grew = await growth(async () => (e = await refusalOf('budget', () => budgeted.encode(IMAGE, { minPixels: 1e9, maxPixels: 1e9 }))));
      expect(e!.code).toBe('ERR_IMAGE_TOO_LARGE');
      expect(e!.message).toMatch(/over memoryBudget 1073741824/);
      expect(grew).toBeLessThan(64 * MiB);
    } finally {
      await budgeted.close();
    }
    // No machine has the 10 TB this would take: ERR_OUT_OF_MEMORY everywhere, before any work.
    const huge = await refusalOf('4e11', () => qwen.encode(IMAGE, { minPixels: 4e11, maxPixels: 4e11 }));
    expect(huge.code).toBe('ERR_OUT_OF_MEMORY');
    expect(huge.message).toMatch(/more than this machine's \d+ bytes of memory/);
  });
});

describe('a batch keeps its good results', () => {
  it('encodeBatch([...goodPaths, 42, null]): each bad entry gets its TesseraError in its slot, the good ones are encoded', async () => {
    const results = await qwen.encodeBatch([IMAGE, 42 as never, null as never, IMAGE]);
    const alone = await qwen.encode(IMAGE);
    expect(results).toHaveLength(4);
    for (const i of [0, 3]) expect((results[i] as EncodeResult).embeddings).toEqual(alone.embeddings);
    for (const [i, what] of [[1, 'number'], [2, 'null']] as const) {
      const e = results[i] as TesseraError;
      expect(e).toBeInstanceOf(TesseraError);
      expect(e.code).toBe('ERR_INVALID_ARGUMENT');
      expect(e.message).toMatch(new RegExp(`^input ${i}: image input must be a file path, a Buffer or a Uint8Array, not ${what}`));
    }
  });
});

describe('caller data is read at the call', () => {
  it('encodePixels copies pixelValues (and the grid) when called: reusing the buffers at once changes nothing', async () => {
    const pixelValues = new Float32Array(16 * PATCH_VALUES).map((_, i) => Math.sin(i * 0.01));
    const grid = { t: 1, h: 4, w: 4 };
    const reference = await vl.encodePixels({ pixelValues: pixelValues.slice(), grid: { ...grid } });
    const pending = vl.encodePixels({ pixelValues, grid });
    pixelValues.fill(Number.NaN);
    grid.h = 2;
    grid.w = 8;
    const r = await pending;
    expect(r.embeddings).toEqual(reference.embeddings);
    expect(r.grid).toEqual([{ t: 1, h: 4, w: 4 }]);
  });
});
