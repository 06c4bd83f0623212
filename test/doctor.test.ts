// tessera doctor (src/doctor.ts, src/cli/doctor.ts): `tessera doctor --json` here runs the shipped fixture
// towers on cpu and, when the MSL emulator is built, on metal-emulated, and every stage of both agrees with
// HF within the tower tests' tolerances (1e-4 for the CPU: test/model-*-tower.test.ts; 5e-3 for Metal:
// test/metal-ops.test.ts); `metal` is reported unavailable off macOS. A reference that disagrees fails the
// verdict (the CLI's exit code 1). The TypeScript build copies the fixtures doctor needs into dist/, which ships.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../src/cli/main.js';
import { doctorFixtureDir, doctorFixtureFiles, loadDoctorCounts } from '../src/doctor-fixtures.js';
import { HF_TOLERANCE, HF_TOLERANCE_F16, countsKey, predictFixture, runDoctor, type DoctorReport } from '../src/doctor.js';
import { addon } from '../src/native.js';
import { GPUS } from '../src/metal/cost-model.js';
// @ts-expect-error: plain ESM build script, no type declarations
import { build } from '../tools/mslemu/build.mjs';

const emu = await build({ quiet: true });
if (!emu.available) console.warn(`test/doctor.test.ts: metal-emulated parts skipped: ${emu.reason}`);
const ROOT = join(import.meta.dirname, '..');

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await run(args, { out: (l) => (out += `${l}\n`), err: (l) => (err += `${l}\n`) } as never);
  return { code, out, err };
}

describe('tessera doctor', () => {
  it(`--json: cpu${emu.available ? ' and metal-emulated' : ''} agree with HF on both fixture towers, every stage timed; metal unavailable off macOS`, async () => {
    const r = await cli(['doctor', '--json']);
    expect(r.err).toBe('');
    const report = JSON.parse(r.out) as DoctorReport;
    expect(r.code, report.verdict.problems.join('\n')).toBe(0);
    expect(report.verdict.ok).toBe(true);
    expect(report.cpu.isa).toMatch(/^(avx512|avx2|neon|scalar)/);
    const byName = Object.fromEntries(report.backends.map((b) => [b.name, b]));
    expect(byName['cpu']!.available).toBe(true);
    if (process.platform !== 'darwin') {
      expect(byName['metal']!.available).toBe(false);
      expect(byName['metal']!.reason).toMatch(/needs macOS on Apple Silicon/);
      expect(report.gpu.available).toBe(false);
    }
    expect(byName['metal-emulated']!.available).toBe(emu.available);
    // Metal runs each fixture in f32 and in f16 (DOCTOR_PRECISIONS), each held to its own tolerance
    const expected = ['cpu f32', ...(emu.available ? ['metal-emulated f32', 'metal-emulated f16'] : [])];
    expect(report.towers.map((t) => t.name)).toEqual(['qwen3_5-tiny/rocket_thin', 'gemma4-tiny/rocket_thin']);
    for (const t of report.towers) {
      expect(t.runs.map((x) => `${x.backend} ${x.precision}`)).toEqual(expected);
      for (const runOf of t.runs) {
        expect(runOf.tolerance).toBe(runOf.backend === 'cpu' ? HF_TOLERANCE['cpu'] : runOf.precision === 'f16' ? HF_TOLERANCE_F16 : HF_TOLERANCE['metal-emulated']);
        expect(runOf.ok, `${t.name} on ${runOf.backend}: ${runOf.error ?? ''}`).toBe(true);
        expect(runOf.stages.length).toBeGreaterThan(3);
        expect(runOf.stages[0]!.name).toBe('embed');
        for (const s of runOf.stages) {
          expect(s.vsHf, `${t.name} ${runOf.backend} ${s.name}`).toBeLessThan(runOf.tolerance);
          if (!s.name.startsWith('deepstack.')) expect(s.ms).toBeGreaterThanOrEqual(0);
          if (runOf.backend === 'cpu') expect(s.vsCpu).toBeUndefined();
          else expect(s.vsCpu).toBeLessThan(runOf.tolerance);
        }
      }
    }
    const text = await cli(['doctor', '--backend', 'cpu']);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/^ok: cpu agree with HF on qwen3_5-tiny\/rocket_thin and gemma4-tiny\/rocket_thin$/m);
    expect(text.out).toMatch(/^ {4}embed +\d/m);
  }, 300_000);

  it('a backend that disagrees with HF fails the verdict and names the stage error', async () => {
    const root = mkdtempSync(join(tmpdir(), 'tessera-doctor-'));
    try {
      for (const f of doctorFixtureFiles()) cpSync(join(ROOT, 'test', 'fixtures', f), join(root, f), { recursive: true });
      // move one stored reference value of the Qwen fixture: 'embed' now disagrees
      const file = join(root, 'qwen3_5-tiny/expected/rocket_thin.safetensors');
      const buf = readFileSync(file);
      const n = Number(buf.readBigUInt64LE(0));
      const h = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { data_offsets: [number, number] }>;
      const at = 8 + n + h['embed']!.data_offsets[0];
      buf.writeFloatLE(buf.readFloatLE(at) + 1, at);
      writeFileSync(file, buf);
      const report = await runDoctor({ backends: ['cpu'], fixtureDir: root });
      expect(report.verdict.ok).toBe(false);
      expect(report.verdict.problems).toHaveLength(1);
      expect(report.verdict.problems[0]).toMatch(/^cpu on qwen3_5-tiny\/rocket_thin: max error vs HF \S+ is not below 0.0001$/);
      const qwen = report.towers[0]!.runs[0]!;
      expect(qwen.stages.find((s) => s.name === 'embed')!.vsHf).toBeGreaterThan(1e-4);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 120_000);

  it.skipIf(!emu.available)(`the cost model's counts of the fixtures (shipped for a Mac, which has no emulator) match the kernels: recounted now${emu.available ? '' : ` (skipped: ${emu.reason})`}`, () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/doctor-counts.mjs'), '--check'], { encoding: 'utf8', timeout: 170_000 });
    expect(r.status, r.stderr).toBe(0);
    const counts = loadDoctorCounts(join(ROOT, 'test', 'fixtures'))!;
    expect(counts.stamp).toBe(addon()['kernelsStamp']);
    const m1 = GPUS.find((g) => g.name === 'M1')!;
    const p = predictFixture(counts, counts.stamp, 'qwen3_5-tiny/rocket_thin', m1);
    expect(p.gpu).toBe('M1');
    expect(p.predictedMs).toBeGreaterThan(0);
    // and of the f16 runs, which move less device memory than the f32 ones
    const h = predictFixture(counts, counts.stamp, countsKey('qwen3_5-tiny/rocket_thin', 'f16'), m1);
    expect(h.predictedMs).toBeGreaterThan(0);
    const bytes = (k: string) => counts.fixtures[k]!.reduce((a, d) => a + d.dev_read + d.dev_write, 0);
    expect(bytes(countsKey('qwen3_5-tiny/rocket_thin', 'f16'))).toBeLessThan(bytes('qwen3_5-tiny/rocket_thin'));
    expect(predictFixture(counts, 'tessera_sources_other', 'qwen3_5-tiny/rocket_thin', m1).note).toMatch(/other kernel sources/);
  }, 180_000);

  // dist/ exists wherever the suite runs: `npm install` builds it (prepare)
  it('the build copies every fixture doctor reads into dist/doctor-fixtures (shipped), and doctor reads that copy', () => {
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/copy-doctor-fixtures.mjs')], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    for (const f of doctorFixtureFiles()) expect(existsSync(join(ROOT, 'dist', 'doctor-fixtures', f)), f).toBe(true);
    expect(doctorFixtureDir(ROOT)).toBe(join(ROOT, 'dist', 'doctor-fixtures'));
    const shipped = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files;
    expect(shipped).toContain('dist');
  });
});
