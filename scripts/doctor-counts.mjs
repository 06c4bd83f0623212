// What the cost model needs to predict `tessera doctor`'s Metal runs on a Mac (src/doctor.ts): every dispatch of
// each doctor fixture tower, as the MSL emulator counts it (docs/metal-on-linux.md#counters), stored in
// test/fixtures/doctor-counts.json (shipped with the fixtures) with the stamp of the kernel sources they were
// counted from (gyp/msl-kernels.mjs). A Mac has no emulator, so the counts travel with the package; the
// doctor test recounts them and fails when a kernel change left them stale.
//   node scripts/doctor-counts.mjs           recount and write the file (needs dist/ and the emulator)
//   node scripts/doctor-counts.mjs --check   recount and compare; exit 1 when the file differs
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
export const COUNTS_FILE = join(ROOT, 'test', 'fixtures', 'doctor-counts.json');
const FIELDS = ['kernel', 'groups', 'dev_read', 'dev_write', 'tg_read', 'tg_write', 'mma', 'fma', 'alu', 'special'];

// Child: one fixture encoded on metal-emulated in `precision` as doctor encodes it (the parent set TESSERA_MSLEMU_COUNTS).
async function child(name, precision) {
  const { loadDoctorFixtures } = await import(join(ROOT, 'dist', 'doctor-fixtures.js'));
  const { VisionTower } = await import(join(ROOT, 'dist', 'index.js'));
  const f = loadDoctorFixtures(join(ROOT, 'test', 'fixtures')).find((x) => x.name === name);
  const tower = await VisionTower.open(f.model, { backend: 'metal-emulated', precision });
  await tower.encodePixels(f.input, { stages: true });
  await tower.close();
}

/** { stamp, fixtures: { name: [dispatch counts], 'name@f16': [...] } }, counted now: each fixture in every
 * precision doctor runs on Metal (src/doctor.ts DOCTOR_PRECISIONS, countsKey). */
export async function countFixtures() {
  const { DOCTOR_FIXTURES } = await import(join(ROOT, 'dist', 'doctor-fixtures.js'));
  const { DOCTOR_PRECISIONS, countsKey } = await import(join(ROOT, 'dist', 'doctor.js'));
  const { writeHeaders } = await import('../gyp/msl-kernels.mjs');
  writeHeaders(join(ROOT, 'build', 'metal'));
  const stamp = /kStampKernel = "(\w+)"/.exec(readFileSync(join(ROOT, 'build', 'metal', 'sources.gen.h'), 'utf8'))[1];
  const dir = mkdtempSync(join(tmpdir(), 'tessera-doctor-counts-'));
  const fixtures = {};
  try {
    for (const f of DOCTOR_FIXTURES)
      for (const precision of DOCTOR_PRECISIONS['metal']) {
        const name = `${f.dir}/${f.caseName}`;
        const file = join(dir, `${f.dir}-${precision}.jsonl`);
        const r = spawnSync(process.execPath, [SELF, '--child', name, precision], { encoding: 'utf8', env: { ...process.env, TESSERA_MSLEMU_COUNTS: file } });
        if (r.status !== 0) throw new Error(`doctor-counts: ${name} (${precision}) failed: ${r.stderr}`);
        fixtures[countsKey(name, precision)] = readFileSync(file, 'utf8').trim().split('\n').map((l) => {
          const d = JSON.parse(l);
          return Object.fromEntries(FIELDS.map((k) => [k, d[k]]));
        });
      }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { stamp, fixtures };
}

export const serialise = (c) => `{"stamp": ${JSON.stringify(c.stamp)}, "fixtures": {\n${Object.entries(c.fixtures)
  .map(([k, v]) => `${JSON.stringify(k)}: [\n${v.map((d) => JSON.stringify(d)).join(',\n')}\n]`).join(',\n')}\n}}\n`;

if (process.argv[1] && process.argv[1] === SELF) {
  if (process.argv[2] === '--child') await child(process.argv[3], process.argv[4]);
  else {
    const text = serialise(await countFixtures());
    if (process.argv.includes('--check')) {
      let old = '';
      try { old = readFileSync(COUNTS_FILE, 'utf8'); } catch {}
      if (old !== text) { console.error(`${COUNTS_FILE} is stale: run node scripts/doctor-counts.mjs`); process.exit(1); }
      console.log('doctor-counts: up to date');
    } else {
      writeFileSync(COUNTS_FILE, text);
      console.log(`doctor-counts: wrote ${COUNTS_FILE}`);
    }
  }
}
