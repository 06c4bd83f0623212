// The bench's onnxruntime held to AVX2 (bench/pieces/ort/ort-held.mjs): the patch changes exactly
// the XCR0 tests it names, inside the window after an xgetbv, and the patched library still loads
// and computes. (Which kernels it then runs is checked by the bench itself:
// a held row above the AVX2 FMA peak is refused; docs/cpu.md records the disassembly check.)
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a bench script in plain JS, without declarations
import { linuxX64Library, ortHeldToAvx2, patchAvx512Checks } from '../pieces/ort/ort-held.mjs';

// The bench's own dependencies (bench/package.json), resolved as the bench scripts resolve them.
const require = createRequire(fileURLToPath(new URL('../pieces/ort/ort-held.mjs', import.meta.url)));
const benchDeps = ['onnxruntime-node/package.json', 'onnx-proto'].every((m) => {
  try {
    require.resolve(m);
    return true;
  } catch {
    return false;
  }
});
const XGETBV = [0x0f, 0x01, 0xd0];
const TEST_E0 = [0x48, 0xf7, 0xd0, 0xa8, 0xe0];
const CMP_E6 = [0x41, 0x81, 0xfe, 0xe6, 0x00, 0x00, 0x00];
const pad = (n: number) => new Array(n).fill(0x90);

describe('patchAvx512Checks', () => {
  it('widens the AVX-512 state tests that follow an xgetbv, and nothing else', () => {
    const before = [...TEST_E0, ...pad(16)]; // before any xgetbv: not a test of its result
    const lib = Buffer.from([...before, ...XGETBV, ...pad(40), ...TEST_E0, ...pad(100), ...CMP_E6, ...pad(3000), ...TEST_E0]);
    const orig = Buffer.from(lib);
    const sites = patchAvx512Checks(lib);
    const e0 = before.length + 3 + 40 + 4, e6 = before.length + 3 + 40 + 5 + 100 + 3;
    expect(sites).toEqual([
      { offset: e0, test: 'not rax; test al, 0xe0' },
      { offset: e6, test: 'cmp r14d, 0xe6' },
    ]);
    expect(lib[e0]).toBe(0xe8);
    expect(lib[e6]).toBe(0xee);
    const changed = [...lib.keys()].filter((i) => lib[i] !== orig[i]);
    expect(changed).toEqual([e0, e6]); // the one past the 2 KiB window and the one before are left
  });

  it('finds nothing to patch in a library without xgetbv', () => {
    expect(patchAvx512Checks(Buffer.from([...TEST_E0, ...CMP_E6]))).toEqual([]);
  });
});

const linuxX64 = process.platform === 'linux' && process.arch === 'x64';
if (linuxX64 && !benchDeps) console.warn('skipped ortHeldToAvx2 on onnxruntime-node: the bench dependencies are not installed (npm install --prefix bench)');
describe.runIf(linuxX64 && benchDeps)('ortHeldToAvx2 on the installed onnxruntime-node', () => {
  const out = mkdtempSync(join(tmpdir(), 'tessera-ort-held-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('patches only the sites it reports, and the copy runs a MatMul as the original does', async () => {
    const held = ortHeldToAvx2(out);
    expect(held.why).toBeUndefined();
    expect(held.sites.some((s: { test: string }) => s.test.endsWith('0xe0'))).toBe(true); // MLAS's own
    const original = readFileSync(linuxX64Library(dirname(require.resolve('onnxruntime-node/package.json'))));
    const patched = readFileSync(linuxX64Library(held.dir));
    expect(patched.length).toBe(original.length);
    const changed: number[] = [];
    for (let i = 0; i < original.length; i++) if (original[i] !== patched[i]) changed.push(i);
    expect(changed).toEqual(held.sites.map((s: { offset: number }) => s.offset).sort((a: number, b: number) => a - b));

    // y = x · w for a 2x3 by 3x2 product. (Only the copy: a second libonnxruntime.so.1 in the same
    // process would resolve to the one already loaded, by its soname.)
    const { onnx } = require('onnx-proto');
    const T = onnx.TensorProto.DataType;
    const w = Float32Array.of(1, 2, 3, 4, 5, 6);
    const vi = (name: string, dims: number[]) => ({ name, type: { tensorType: { elemType: T.FLOAT, shape: { dim: dims.map((d) => ({ dimValue: d })) } } } });
    const model = onnx.ModelProto.encode(onnx.ModelProto.create({
      irVersion: 9, opsetImport: [{ domain: '', version: 20 }],
      graph: {
        name: 'matmul', node: [{ opType: 'MatMul', input: ['x', 'w'], output: ['y'] }],
        initializer: [{ name: 'w', dims: [3, 2], dataType: T.FLOAT, rawData: new Uint8Array(w.buffer) }],
        input: [vi('x', [2, 3])], output: [vi('y', [2, 2])],
      },
    })).finish();
    const run = async (ort: any) => {
      const s = await ort.InferenceSession.create(model);
      const y = (await s.run({ x: new ort.Tensor('float32', Float32Array.of(1, 0, -1, 0.5, 2, 3), [2, 3]) })).y.data;
      await s.release();
      return Array.from(y as Float32Array);
    };
    const expected = [1 - 5, 2 - 6, 0.5 + 6 + 15, 1 + 8 + 18];
    expect(await run(require(held.dir))).toEqual(expected);
  }, 60_000);
});
