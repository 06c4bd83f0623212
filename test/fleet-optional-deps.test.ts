// bullmq and ioredis are optional peer dependencies: without them, the library and `tessera encode`
// work, and `tessera worker`, `enqueue` and `queue-status` end with exit 2 and a TesseraError
// (ERR_BACKEND_UNAVAILABLE) that names the install command. The packages are hidden from the
// spawned CLI by a module-resolution hook (helpers/hide-fleet-packages.mjs), which throws Node's own
// ERR_MODULE_NOT_FOUND for them; the package-install test checks the same in a real install
// without them.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { FIXTURES } from './helpers/fixtures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');
const HIDE = join(ROOT, 'test', 'helpers', 'hide-fleet-packages.mjs');
const MODEL = join(FIXTURES, 'qwen3_vl-tiny/model');
const tmp = mkdtempSync(join(tmpdir(), 'tessera-nofleet-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function tessera(args: string[], hide = true) {
  const r = spawnSync(process.execPath, [...(hide ? ['--import', HIDE] : []), MAIN, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

// A port nothing listens on: the commands must fail on the missing packages before any connection.
const REDIS = ['--redis', 'redis://127.0.0.1:9', '--queue', 'q'];

describe('without bullmq and ioredis', () => {
  it('the hook hides them (a plain import fails as a missing package would)', () => {
    const r = spawnSync(process.execPath, ['--import', HIDE, '--input-type=module', '-e', "await import('bullmq')"], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain("Cannot find package 'bullmq'");
  });

  it.each([
    ['worker', ['worker', ...REDIS, '--model', MODEL, '--out-dir', join(tmp, 'out')]],
    ['enqueue', ['enqueue', join(FIXTURES, 'images', 'tiny.png'), ...REDIS]],
    ['queue-status', ['queue-status', ...REDIS]],
  ])('tessera %s ends with exit 2 naming the install command', (name, args) => {
    const r = tessera(args);
    expect(r.stderr).toContain(`tessera ${name}: ERR_BACKEND_UNAVAILABLE: tessera ${name} needs the optional packages bullmq and ioredis`);
    expect(r.stderr).toContain('npm install bullmq ioredis');
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/); // no stack trace
    expect(r.code).toBe(2);
  });

  it('--help still answers, and tessera encode works', () => {
    expect(tessera(['worker', '--help']).code).toBe(0);
    const r = tessera(['encode', join(FIXTURES, 'images', 'tiny.png'), '--model', MODEL, '--max-pixels', '32768', '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});
