// --out-dtype f32|bf16|f16 (library: outputDtype): the narrowing (round to nearest, ties to even, as
// torch's .to() rounds) against known bit patterns: ties, overflow to inf, subnormals, NaN, inf,
// signed zero; then what each --out-dir format writes with it, read back independently of the
// writer; the record names the dtype, and a rerun with another dtype redoes the outputs.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { narrowF32, roundedF32 } from '../src/outputs/out-dtype.js';
import { FIXTURES, readTensors } from './helpers/fixtures.js';
import { readNpy } from './helpers/npy.js';
import { readStoredZip } from './helpers/torch-zip.js';
import { tesseraInProcess as tessera } from './helpers/cli.js';

const IMAGES = join(FIXTURES, 'images');
const QWEN35 = join(FIXTURES, 'qwen3_5-tiny', 'model');
let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'tessera-out-dtype-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const f32 = (bits: number) => new Float32Array(new Uint32Array([bits]).buffer)[0]!;
const narrow = (bits: number[], dtype: 'bf16' | 'f16') => [...(narrowF32(new Float32Array(new Uint32Array(bits).buffer), dtype) as Uint16Array)];

describe('narrowing f32 (torch .to() rounding)', () => {
  it('bf16: nearest, ties to even, overflow to inf, NaN stays a quiet NaN, signs and zeros kept', () => {
    const cases: [number, number, string][] = [
      [0x3f800000, 0x3f80, '1.0'],
      [0x3f808000, 0x3f80, 'tie between 1.0 and the next: to even (down)'],
      [0x3f818000, 0x3f82, 'tie to even (up)'],
      [0x3f808001, 0x3f81, 'just past the tie: up'],
      [0x3f807fff, 0x3f80, 'just below the tie: down'],
      [0x7f7fffff, 0x7f80, 'the largest f32 rounds to inf'],
      [0x7f7f7fff, 0x7f7f, 'the largest bf16 stays'],
      [0xff800000, 0xff80, '-inf'],
      [0x7f800000, 0x7f80, 'inf'],
      [0x7fc00000, 0x7fc0, 'quiet NaN'],
      [0x7f800001, 0x7fc0, 'a signalling NaN whose payload is in the low bits: still NaN, quiet'],
      [0xffc00000, 0xffc0, 'negative NaN'],
      [0x00000001, 0x0000, 'the smallest f32 subnormal: to zero'],
      [0x00008000, 0x0000, 'subnormal tie: to even (zero)'],
      [0x00018000, 0x0002, 'subnormal tie: to even (up)'],
      [0x80000000, 0x8000, '-0'],
    ];
    expect(narrow(cases.map((c) => c[0]), 'bf16').map((v, i) => [v.toString(16), cases[i]![2]])).toEqual(cases.map((c) => [c[1].toString(16), c[2]]));
  });

  it('f16: nearest, ties to even, overflow to inf, subnormals, NaN', () => {
    const cases: [number, number, string][] = [
      [0x3f800000, 0x3c00, '1.0'],
      [0x3f801000, 0x3c00, '1 + 2^-11 (a tie): to even (down)'],
      [0x3f803000, 0x3c02, '1 + 3 x 2^-11 (a tie): to even (up)'],
      [0x477fe000, 0x7bff, '65504, the largest f16'],
      [0x477ff000, 0x7c00, '65520 (a tie with 65536): to inf'],
      [0x477fefff, 0x7bff, 'just below that tie'],
      [0x33800000, 0x0001, '2^-24, the smallest f16 subnormal'],
      [0x33000000, 0x0000, '2^-25 (a tie with 0): to even (zero)'],
      [0x33c00000, 0x0002, '3 x 2^-25 (a tie): to even (2^-23)'],
      [0x38800000, 0x0400, '2^-14, the smallest normal'],
      [0xc7800000, 0xfc00, '-65536: -inf'],
      [0x7fc00000, 0x7e00, 'NaN'],
      [0xffc00001, 0xfe00, 'negative NaN'],
      [0x80000000, 0x8000, '-0'],
    ];
    expect(narrow(cases.map((c) => c[0]), 'f16').map((v, i) => [v.toString(16), cases[i]![2]])).toEqual(cases.map((c) => [c[1].toString(16), c[2]]));
  });

  it('f32 is written as it is; roundedF32 gives the narrowed values back exactly', () => {
    const v = Float32Array.of(1 / 3, -2.5e-8, 70000, f32(0x3f808001));
    expect(narrowF32(v, 'f32')).toBe(v);
    expect([...roundedF32(v, 'bf16')]).toEqual([f32(0x3eab0000), f32(0xb2d70000), f32(0x47890000), f32(0x3f810000)]);
    expect([...roundedF32(v, 'f16')]).toEqual([f32(0x3eaaa000), -0, Infinity, f32(0x3f808000)]);
  });
});

const at = (dir: string, name: string) => join(dir, relative(process.cwd(), IMAGES), name);
const encode = (dir: string, ...more: string[]) =>
  tessera('encode', join(IMAGES, 'tiny.png'), '--model', QWEN35, '--out-dir', dir, '--json', ...more);

describe('--out-dtype through the --out-dir formats', () => {
  it('safetensors: BF16 embeddings = the f32 ones narrowed; the record names the dtype; another dtype is redone', async () => {
    const ref = join(tmp, 'ref');
    expect((await encode(ref)).code).toBe(0);
    const dir = join(tmp, 'bf16');
    const r = await encode(dir, '--out-dtype', 'bf16');
    expect(r.code, r.stderr).toBe(0);
    const a = readTensors(at(ref, 'tiny.safetensors'));
    const file = at(dir, 'tiny.safetensors');
    const buf = readFileSync(file);
    const header = JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString('utf8'));
    expect(header.embeddings.dtype).toBe('BF16');
    expect(header.grid_thw.dtype).toBe('I64'); // integer tensors as they are
    expect(header.__metadata__.output_dtype).toBe('bf16');
    expect(JSON.parse(header.__metadata__.tessera_output).outputDtype).toBe('bf16');
    const [s, e] = header.embeddings.data_offsets as [number, number];
    const start = 8 + Number(buf.readBigUInt64LE(0));
    const bits = new Uint16Array(new Uint8Array(buf.subarray(start + s, start + e)).buffer);
    expect([...bits]).toEqual([...(narrowF32(a['embeddings']!.f32(), 'bf16') as Uint16Array)]);
    expect(bits.length).toBe(a['embeddings']!.f32().length); // half the bytes of the f32 file's tensor
    // Rerun: the same dtype is up to date, another is redone.
    const again = JSON.parse((await encode(dir, '--out-dtype', 'bf16')).stdout.split('\n').pop()!);
    expect(again.skipped).toBe(1);
    const other = JSON.parse((await encode(dir, '--out-dtype', 'f16')).stdout.split('\n').pop()!);
    expect(other.encoded).toBe(1);
  });

  it('npy: f16 as <f2; bf16 refused (numpy has no bfloat16), naming the way out', async () => {
    const dir = join(tmp, 'npy');
    expect((await encode(dir, '--format', 'npy', '--out-dtype', 'f16')).code).toBe(0);
    const npy = readNpy(readFileSync(at(dir, 'tiny.embeddings.npy')));
    expect(npy.descr).toBe('<f2');
    const rec = JSON.parse(readFileSync(at(dir, 'tiny.tessera.json'), 'utf8'));
    expect(rec.record.output_dtype).toBe('f16');
    const refused = await encode(join(tmp, 'npy-bf16'), '--format', 'npy', '--out-dtype', 'bf16');
    expect(refused.code).not.toBe(0);
    expect(refused.stdout + refused.stderr).toMatch(/bfloat16.*--out-dtype f16/);
    // The refusal names the flag as it is typed (the option's key is outputDtype).
    expect(refused.stdout + refused.stderr).toMatch(/"message":"--out-dtype /);
    expect(refused.stdout + refused.stderr).not.toMatch(/--output-dtype/);
  });

  it('vllm-torch: a BFloat16Storage tensor; sglang: every number a bf16 value', async () => {
    const dir = join(tmp, 'torch');
    expect((await encode(dir, '--format', 'vllm-torch', '--out-dtype', 'bf16')).code).toBe(0);
    const part = JSON.parse(readFileSync(at(dir, 'tiny.vllm.json'), 'utf8'));
    const zip = readStoredZip(Buffer.from(part.image_embeds.image_embeds, 'base64'));
    expect(zip.get('archive/data.pkl')!.data.includes(Buffer.from('torch\nBFloat16Storage\n'))).toBe(true);
    const grid = readStoredZip(Buffer.from(part.image_embeds.image_grid_thw, 'base64'));
    expect(grid.get('archive/data.pkl')!.data.includes(Buffer.from('torch\nLongStorage\n'))).toBe(true);

    const sg = join(tmp, 'sglang');
    expect((await encode(sg, '--format', 'sglang', '--out-dtype', 'bf16')).code).toBe(0);
    const item = JSON.parse(readFileSync(at(sg, 'tiny.sglang.json'), 'utf8'));
    const values = Float32Array.from((item.feature as number[][]).flat());
    expect(values.length).toBeGreaterThan(0);
    expect([...new Uint32Array(values.buffer)].filter((b) => (b & 0xffff) !== 0)).toEqual([]); // each exactly a bf16
  });
});
