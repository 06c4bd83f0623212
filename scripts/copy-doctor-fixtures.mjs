// Part of the TypeScript build (npm run build:ts, prepare): copies the fixture towers and HF references that
// `tessera doctor` runs (the list: src/doctor-fixtures.ts) from test/fixtures/ into dist/doctor-fixtures/,
// which the package ships (test/ is not shipped). Needs dist/ built (it reads the list from there).
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { doctorFixtureFiles } = await import(join(ROOT, 'dist', 'doctor-fixtures.js'));
const to = join(ROOT, 'dist', 'doctor-fixtures');
rmSync(to, { recursive: true, force: true });
for (const f of doctorFixtureFiles()) cpSync(join(ROOT, 'test', 'fixtures', f), join(to, f), { recursive: true });
