// The AVX2 GEMM micro-kernel's k loop as the compiler emits it (bench/pieces/cpu-loop-model.mjs):
// its loop is found in a disassembly as the bench finds it, it keeps to its three scalar ops a pass
// (two pointer steps and the fused branch) over two k steps with nothing spilled, and on llvm-mca's
// models of 4-wide cores the Intel table's loop issues at its FMA bound (docs/cpu.md#the-k-loops-own-cost).
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a bench script in plain JS, without declarations
import { findMca, fullTile, hotLoop, kernelLoops, mcaInput, model } from '../pieces/cpu-loop-model.mjs';

type Ins = { addr: number; text: string };
type Loop = { name: string; steps: number; loop: { seg: Ins[]; fmas: number }; asm: string };

const SYM = 'gemm_micro_t<V, 6, 2, 2, 6>(long)';
const fn = (name: string, body: string[]) =>
  [`0000000000001000 <${name}>:`, ...body.map((t, i) => `    ${(0x1000 + 4 * i).toString(16)}:\t${t}`)].join('\n');

describe('hotLoop / mcaInput on a disassembly', () => {
  const outerAt = 0x1000, innerAt = 0x1000 + 4 * 2;
  const body = [
    'vxorps %ymm0,%ymm0,%ymm0',
    'vfmadd231ps %ymm1,%ymm2,%ymm3', // the outer loop's own FMA
    'vbroadcastss (%rdx),%ymm2', // inner loop from here
    'vfmadd231ps %ymm1,%ymm2,%ymm4',
    'vfmadd231ps %ymm0,%ymm2,%ymm5',
    'add    $0x4,%rdx',
    'cmp    %rdx,%r8',
    `jne    ${innerAt.toString(16)} <gemm_micro_t<V, 6, 2, 2, 6>(long)+0x8>`,
    'sub    $0x1,%r9',
    `jne    ${outerAt.toString(16)} <gemm_micro_t<V, 6, 2, 2, 6>(long)>`,
    'ret',
  ];
  const dis = [fn('other(int)', ['vfmadd231ps %ymm1,%ymm2,%ymm3', 'jmp 1000 <other(int)>']), fn(SYM, body)].join('\n\n');

  it('takes the innermost FMA loop of the named function', () => {
    const loop = hotLoop(dis, SYM);
    expect(loop.fmas).toBe(2);
    expect(loop.seg.map((x: Ins) => x.text)).toEqual([...body.slice(2, 7), `jne    ${innerAt.toString(16)}`]);
  });

  it('gives llvm-mca the loop with its branch to a label and the fused compare left out', () => {
    expect(mcaInput(hotLoop(dis, SYM)).split('\n')).toEqual(['L1:', ...body.slice(2, 6), 'jne L1', '']);
  });

  it("takes the full tile (rows = the panel's rows) of the asked widening and dtype, not a short one", () => {
    const micro = (unpack: boolean, mr: number, dt: number) =>
      `gemm_micro_t<tessera::cpu::(anonymous namespace)::V256<${unpack}>, ${mr}, 2, ${dt}, 6>(long, float const*)`;
    const d = [micro(false, 4, 2), micro(true, 6, 2), micro(false, 6, 0), micro(false, 6, 2)].map((n) => fn(n, ['ret'])).join('\n\n');
    const sym = (unpack: boolean, mr: number, dt: number) => micro(unpack, mr, dt).slice(0, micro(unpack, mr, dt).indexOf('(long') + 1);
    expect(fullTile(d, { unpack: false, dtype: 2 })).toEqual({ sym: sym(false, 6, 2), rows: 6, vectors: 2 });
    expect(fullTile(d, { unpack: true, dtype: 2 })).toEqual({ sym: sym(true, 6, 2), rows: 6, vectors: 2 });
    expect(() => fullTile(d, { unpack: true, dtype: 0 })).toThrow(/no full-tile micro-kernel V256<true> of dtype 0/);
  });

  it('names a missing function or loop', () => {
    expect(() => hotLoop(dis, 'absent(')).toThrow(/no function absent\(/);
    expect(() => hotLoop(fn(SYM, ['ret']), SYM)).toThrow(/no FMA loop/);
  });
});

const gxx = !spawnSync(process.env['CXX'] ?? 'g++', ['--version']).error && !spawnSync('objdump', ['--version']).error;
describe.runIf(process.arch === 'x64')('the compiled AVX2 micro-kernels', () => {
  it.runIf(gxx)('run two k steps a pass on three scalar ops, with nothing on the stack', () => {
    const loops: Loop[] = kernelLoops();
    for (const l of loops) {
      expect(l.steps, l.name).toBe(2);
      const texts = l.loop.seg.map((x) => x.text);
      expect(texts.filter((t) => /%[re]sp\b/.test(t)), l.name).toEqual([]);
      const scalar = texts.filter((t) => !/^v/.test(t));
      expect(scalar.length, `${l.name}: ${scalar.join('; ')}`).toBeLessThanOrEqual(4); // 2 steps, compare, branch
    }
  });

  const mca = gxx && findMca() !== null;
  if (!mca) console.warn('loop-model: skipped: needs g++, objdump and llvm-mca 19 or later (Debian: apt-get install llvm-19)');
  it.runIf(mca)('issue the Intel table at its FMA bound on 4-wide cores (llvm-mca)', () => {
    const rows = model() as { name: string; cores: { cpu: string; ofBound: number }[] }[];
    const unpack = rows.find((r) => r.name.includes('unpacks'))!;
    for (const c of unpack.cores.filter((c) => c.cpu === 'haswell' || c.cpu === 'skylake'))
      expect(c.ofBound, c.cpu).toBeGreaterThan(0.99);
  });
});
