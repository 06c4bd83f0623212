// tessera doctor, as a library function (the CLI, src/cli/doctor.ts, prints what this returns): what this
// machine can run and whether each backend computes what HF computes. It lists the backends, the CPU's ISA
// and the Metal GPU (name, family, memory, what it lacks for the kernels), runs the shipped fixture towers
// (src/doctor-fixtures.ts) on every backend available, and compares every stage with the CPU backend and with
// HF's stored reference (max |ours - ref| / max |ref|, the measure of every tower test), timing each stage.
// Beside a measured Metal run on a Mac it puts the cost model's prediction for that GPU where one exists
// (src/metal/cost-model.ts). The verdict fails when an available backend disagrees with HF beyond its
// tolerance (docs/design.md#numerics) or fails to run.
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { toTesseraError } from './errors.js';
import { doctorFixtureDir, loadDoctorCounts, loadDoctorFixtures, type DoctorCounts, type DoctorFixture } from './doctor-fixtures.js';
import { estimate, gpuModelFor, type GpuModel } from './metal/cost-model.js';
import { addon } from './native.js';
import { packageRoot } from './package-root.js';
import { VisionTower, type OpenOptions } from './tower.js';
import type { Precision } from './options.js';

/** Agreement with HF's fp32 reference each backend is held to (docs/design.md#numerics; the tower tests use the same). */
export const HF_TOLERANCE: Record<string, number> = { cpu: 1e-4, metal: 5e-3, 'metal-emulated': 5e-3 };
/**
 * The same for precision 'f16' (docs/metal.md#half-precision): HF's own fp16 lands up to 1.44e-2 from its fp32 on
 * the fixture towers (test/fixtures/gemma4-tiny/hf-f16.json), so half is held to 2e-2.
 */
export const HF_TOLERANCE_F16 = 2e-2;
/** The precisions doctor runs on each backend: the Metal backends in f32 and f16 (the CPU has no half path). */
export const DOCTOR_PRECISIONS: Record<string, readonly Precision[]> = { cpu: ['f32'], metal: ['f32', 'f16'], 'metal-emulated': ['f32', 'f16'] };
/** The key of a fixture's dispatch counts in doctor-counts.json for `precision` (scripts/doctor-counts.mjs writes both). */
export const countsKey = (fixture: string, precision: Precision) => (precision === 'f32' ? fixture : `${fixture}@${precision}`);

export const DOCTOR_BACKENDS = ['cpu', 'metal', 'metal-emulated'] as const;

export interface DoctorGpu {
  available: boolean;
  reason?: string;
  name?: string;
  appleFamily?: number;
  metal3?: boolean;
  maxThreadgroupMemory?: number;
  workingSetBytes?: number;
  /** Threadgroup memory the kernels need (native/metal/capability.h). */
  kernelsThreadgroupMemory?: number;
  /** What the GPU lacks for the kernels; '' when it can run them. */
  missing?: string;
}

export interface DoctorStage {
  name: string;
  /** Wall time of the stage (the encode downloads every stage, so a GPU stage is waited for). */
  ms: number;
  vsHf: number;
  /** Against the CPU backend's output of the same stage (absent for the CPU itself). */
  vsCpu?: number;
}

export interface DoctorRun {
  backend: string;
  /** What ran (tower.info.precision): 'f32', or 'f16' on Metal. */
  precision: Precision;
  ok: boolean;
  error?: string;
  ms?: number;
  tolerance: number;
  maxVsHf?: number;
  maxVsCpu?: number;
  stages: DoctorStage[];
  /** Metal on a GPU the cost model lists: its prediction for this tower beside the measured time. */
  costModel?: DoctorPrediction;
}

export interface DoctorPrediction {
  gpu: string;
  /** The model's time for every dispatch of this encode (launch overhead and latency are not modelled). */
  predictedMs?: number;
  measuredOverPredicted?: number;
  /** Why there is no prediction (counts from other kernel sources). */
  note?: string;
}

export interface DoctorTower {
  name: string;
  family: string;
  patches: number;
  runs: DoctorRun[];
}

export interface DoctorReport {
  tessera: string;
  node: string;
  platform: string;
  arch: string;
  cpu: { model: string; cores: number; isa: string };
  gpu: DoctorGpu;
  backends: { name: string; available: boolean; reason?: string }[];
  towers: DoctorTower[];
  verdict: { ok: boolean; summary: string; problems: string[] };
}

export interface DoctorOptions {
  /** Backends to try (default: all three); one not available here is listed as such and not run. */
  backends?: readonly string[];
  /** The folder holding the fixture towers (default: src/doctor-fixtures.ts doctorFixtureDir()). */
  fixtureDir?: string;
}

/** max |ours - ref| / max |ref| (NaN anywhere: Infinity). */
export function maxRelErr(ours: ArrayLike<number>, ref: ArrayLike<number>): number {
  if (ours.length !== ref.length) return Infinity;
  let diff = 0;
  let mx = 0;
  for (let i = 0; i < ref.length; i++) {
    const d = Math.abs(ours[i]! - ref[i]!);
    if (!(d <= diff)) diff = Number.isNaN(d) ? Infinity : d;
    mx = Math.max(mx, Math.abs(ref[i]!));
  }
  return mx === 0 ? diff : diff / mx;
}

function version(): string {
  try {
    return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function gpuInfo(): DoctorGpu {
  const lib = addon();
  const fn = lib['metalGpu'] as (() => DoctorGpu) | undefined;
  return fn ? fn() : { available: false, reason: 'this addon build does not describe GPUs' };
}

/** Why `backend` cannot run here, or undefined when it can (without opening a tower). */
function unavailable(backend: string, gpu: DoctorGpu): string | undefined {
  if (backend === 'cpu') return undefined;
  if (backend === 'metal') {
    if (process.platform !== 'darwin' || process.arch !== 'arm64') return `needs macOS on Apple Silicon (this is ${process.platform}/${process.arch})`;
    if (!gpu.available) return gpu.reason ?? 'no Metal GPU';
    if (gpu.missing) return `the GPU '${gpu.name}' (family Apple${gpu.appleFamily}) lacks ${gpu.missing}`;
    return undefined;
  }
  if (backend === 'metal-emulated') {
    const fn = addon()['metalEmulator'] as (() => { available: boolean; reason?: string }) | undefined;
    const e = fn ? fn() : { available: false, reason: 'this addon build has no emulator probe' };
    return e.available ? undefined : e.reason ?? 'the MSL emulator library is not built';
  }
  return `unknown backend '${backend}'`;
}

interface Outputs {
  ms: number;
  stages: { name: string; ms: number; data: Float32Array }[];
}

async function encodeFixture(f: DoctorFixture, backend: string, precision: Precision = 'f32'): Promise<Outputs> {
  const tower = await VisionTower.open(f.model, { backend: backend as NonNullable<OpenOptions['backend']>, precision });
  try {
    if (tower.info.precision !== precision) throw new Error(`asked for precision ${precision}, ${tower.info.precision} ran`);
    const stageMs: number[] = [];
    const t0 = performance.now();
    const r = await tower.encodePixels(f.input, { stages: true, onProgress: (p) => stageMs.push(p.ms) });
    const ms = performance.now() - t0;
    const names = tower.spec.stages.map((s) => s.name);
    const stages = names.map((name, i) => ({ name, ms: stageMs[i] ?? NaN, data: r.stages![name]! }));
    (r.deepstack ?? []).forEach((d, k) => stages.push({ name: `deepstack.${k}`, ms: NaN, data: d }));
    return { ms, stages };
  } finally {
    await tower.close();
  }
}

function compare(f: DoctorFixture, backend: string, precision: Precision, out: Outputs, cpu: Outputs | undefined): DoctorRun {
  const tolerance = precision === 'f16' ? HF_TOLERANCE_F16 : HF_TOLERANCE[backend] ?? 5e-3;
  const stages: DoctorStage[] = [];
  for (const s of out.stages) {
    const ref = f.reference.get(s.name);
    if (!ref) continue;  // a stage HF's reference does not hold
    const c = cpu?.stages.find((x) => x.name === s.name);
    stages.push({ name: s.name, ms: s.ms, vsHf: maxRelErr(s.data, ref), ...(cpu && c ? { vsCpu: maxRelErr(s.data, c.data) } : {}) });
  }
  const maxVsHf = Math.max(0, ...stages.map((s) => s.vsHf));
  const vsCpu = stages.filter((s) => s.vsCpu !== undefined).map((s) => s.vsCpu!);
  const ok = stages.length > 0 && stages.length === f.reference.size && maxVsHf < tolerance;
  return {
    backend,
    precision,
    ok,
    ms: out.ms,
    tolerance,
    maxVsHf,
    ...(vsCpu.length ? { maxVsCpu: Math.max(...vsCpu) } : {}),
    stages,
    ...(stages.length !== f.reference.size ? { error: `compared ${stages.length} of the reference's ${f.reference.size} stages` } : {}),
  };
}

/** The cost model's time for `fixture`'s dispatches on `gpu`, from the shipped counts. */
export function predictFixture(counts: DoctorCounts | undefined, stamp: string, fixture: string, gpu: GpuModel): DoctorPrediction {
  const list = counts?.fixtures[fixture];
  if (!counts || !list) return { gpu: gpu.name, note: 'no emulator counts for this fixture are installed' };
  if (counts.stamp !== stamp) return { gpu: gpu.name, note: `the counts are of other kernel sources (${counts.stamp}, this build: ${stamp})` };
  return { gpu: gpu.name, predictedMs: estimate(list, gpu).s * 1000 };
}

/** Runs the checks; never throws for a backend that fails (that is in the report), only for a broken install. */
export async function runDoctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  const lib = addon();
  const gpu = gpuInfo();
  const wanted = options.backends ?? DOCTOR_BACKENDS;
  const backends = wanted.map((name) => {
    const reason = unavailable(name, gpu);
    return reason === undefined ? { name, available: true } : { name, available: false, reason };
  });
  const fixtureDir = options.fixtureDir ?? doctorFixtureDir();
  const fixtures = loadDoctorFixtures(fixtureDir);
  const model = gpu.available && gpu.name ? gpuModelFor(gpu.name) : undefined;
  const counts = model ? loadDoctorCounts(fixtureDir) : undefined;
  const towers: DoctorTower[] = [];
  const problems: string[] = [];
  for (const f of fixtures) {
    const runs: DoctorRun[] = [];
    let cpu: Outputs | undefined;
    // the CPU first: every other backend is compared with it too
    const order = ['cpu', ...backends.filter((b) => b.available && b.name !== 'cpu').map((b) => b.name)];
    for (const backend of order) {
      const wantedHere = backends.some((b) => b.name === backend && b.available);
      for (const precision of wantedHere ? DOCTOR_PRECISIONS[backend] ?? ['f32'] : ['f32' as const]) {
        const label = precision === 'f32' ? backend : `${backend} (${precision})`;
        try {
          const out = await encodeFixture(f, backend, precision);
          if (backend === 'cpu') cpu = out;
          if (!wantedHere) continue;
          const run = compare(f, backend, precision, out, backend === 'cpu' ? undefined : cpu);
          if (backend === 'metal' && model) {
            const p = predictFixture(counts, String(lib['kernelsStamp'] ?? ''), countsKey(f.name, precision), model);
            run.costModel = p.predictedMs ? { ...p, measuredOverPredicted: out.ms / p.predictedMs } : p;
          }
          runs.push(run);
          if (!run.ok)
            problems.push(`${label} on ${f.name}: ${run.error ?? `max error vs HF ${run.maxVsHf!.toExponential(2)} is not below ${run.tolerance}`}`);
        } catch (e) {
          const err = toTesseraError(e);
          if (!wantedHere) continue;
          runs.push({ backend, precision, ok: false, error: `${err.code}: ${err.message}`, tolerance: precision === 'f16' ? HF_TOLERANCE_F16 : HF_TOLERANCE[backend] ?? 5e-3, stages: [] });
          problems.push(`${label} on ${f.name}: ${err.code}: ${err.message}`);
        }
      }
    }
    towers.push({ name: f.name, family: f.family, patches: f.patches, runs });
  }
  const ran = backends.filter((b) => b.available).map((b) => b.name);
  const ok = problems.length === 0 && ran.length > 0;
  return {
    tessera: version(),
    node: process.version,
    platform: process.platform,
    arch: process.arch,
    cpu: { model: cpus()[0]?.model ?? 'unknown', cores: cpus().length, isa: lib.simdLevel },
    gpu,
    backends,
    towers,
    verdict: {
      ok,
      summary: ok
        ? `ok: ${ran.join(', ')} agree with HF on ${fixtures.map((f) => f.name).join(' and ')}`
        : `FAILED: ${problems.length} problem(s)`,
      problems,
    },
  };
}
