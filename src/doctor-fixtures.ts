// The towers `tessera doctor` runs: the test suite's tiny fixture towers each family names in the registry
// (src/families/registry.ts; a few blocks, real layouts) with one case each and its reference from HF
// transformers (every stage's output, fp32 on the CPU: test/fixtures/<dir>/cases.json says how they were
// made). The TypeScript build copies exactly these files into dist/doctor-fixtures/
// (scripts/copy-doctor-fixtures.mjs), which the package ships, so doctor compares against HF on any install
// rather than against a tower synthesized on the spot, which would have no reference but the CPU backend.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TesseraError } from './errors.js';
import { familyOf, REGISTRY } from './families/registry.js';
import type { DispatchCounts } from './metal/cost-model.js';
import { packageRoot } from './package-root.js';
import type { Family } from './spec/types.js';
import type { PixelInput } from './tower.js';

export interface DoctorFixture {
  /** "qwen3_5-tiny/rocket_thin" */
  name: string;
  family: Family;
  model: string;
  input: PixelInput;
  patches: number;
  /** HF's output of every stage, by tessera's stage name. */
  reference: Map<string, Float32Array>;
}

interface DoctorFixtureEntry {
  dir: string;
  family: Family;
  caseName: string;
}

/** The shipped fixtures: folder under test/fixtures and the case, as each registered family names them. */
export const DOCTOR_FIXTURES: readonly DoctorFixtureEntry[] = REGISTRY.flatMap((f): readonly DoctorFixtureEntry[] => f.doctorFixtures);

/** What doctor reads, relative to a fixture folder (test/fixtures/ or dist/doctor-fixtures/): models are folders. */
export function doctorFixtureFiles(): string[] {
  return [...DOCTOR_FIXTURES.flatMap((f) => [`${f.dir}/model`, `${f.dir}/expected/${f.caseName}.safetensors`]), DOCTOR_COUNTS];
}

/** Every dispatch of each fixture as the MSL emulator counts it, and the kernels' stamp (scripts/doctor-counts.mjs). */
export const DOCTOR_COUNTS = 'doctor-counts.json';
export interface DoctorCounts {
  stamp: string;
  fixtures: Record<string, DispatchCounts[]>;
}

export function loadDoctorCounts(fixtureDir: string = doctorFixtureDir()): DoctorCounts | undefined {
  try {
    return JSON.parse(readFileSync(join(fixtureDir, DOCTOR_COUNTS), 'utf8')) as DoctorCounts;
  } catch {
    return undefined;
  }
}

/** Where the fixtures are: the build's copy (an install), else the repository's test/fixtures (a clone). */
export function doctorFixtureDir(root: string = packageRoot()): string {
  const built = join(root, 'dist', 'doctor-fixtures');
  return existsSync(built) ? built : join(root, 'test', 'fixtures');
}

/** Every tensor of a safetensors file as raw bytes with its dtype (the reference files: small, ours). */
function readTensorFile(path: string): Map<string, { dtype: string; bytes: Uint8Array }> {
  let buf: Buffer;
  try {
    buf = readFileSync(path);
  } catch (e) {
    throw new TesseraError('ERR_MODEL_NOT_FOUND', `tessera doctor: its reference ${path} is missing (${(e as Error).message}); reinstall tessera-vision`);
  }
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; data_offsets: [number, number] }>;
  const out = new Map<string, { dtype: string; bytes: Uint8Array }>();
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    out.set(name, { dtype: h.dtype, bytes: new Uint8Array(buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1])) });
  }
  return out;
}

const f32 = (b: Uint8Array) => new Float32Array(b.slice().buffer);
const INPUTS = new Set(['pixel_values', 'image_grid_thw', 'positions']);

export function loadDoctorFixtures(fixtureDir: string = doctorFixtureDir()): DoctorFixture[] {
  return DOCTOR_FIXTURES.map((f) => {
    const dir = join(fixtureDir, f.dir);
    const t = readTensorFile(join(dir, 'expected', `${f.caseName}.safetensors`));
    const need = (name: string) => {
      const v = t.get(name);
      if (!v) throw new TesseraError('ERR_MODEL_FORMAT', `tessera doctor: reference ${f.dir}/${f.caseName} has no '${name}'`);
      return v.bytes;
    };
    const { input, patches } = familyOf(f.family).pixelInput.fromReference(need);
    const reference = new Map<string, Float32Array>();
    for (const [name, v] of t) if (!INPUTS.has(name) && v.dtype === 'F32') reference.set(name, f32(v.bytes));
    return { name: `${f.dir}/${f.caseName}`, family: f.family, model: join(dir, 'model'), input, patches, reference };
  });
}
