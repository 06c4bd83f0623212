// The package as a user gets it: `npm pack` of this checkout (which builds the prebuilt binaries), then
// `npm install <tarball>` into an empty project with no compiler on PATH, then an ES module script, a
// CommonJS script and the `tessera` command run there, and TypeScript checks an .ts and a .cts consumer
// against the package's declarations alone, with no zod to be found (our types never need zod's).
// Packaging can then never break silently: a file left out of `files`, a dangling export, a dependency
// that a source build would need, a prebuilt binary that does not load.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { FIXTURES } from './helpers/fixtures.js';
import { installPrngStub, nodeExe, runWine, winePrefix, wineMissing, winPath } from './helpers/wine.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MODEL = join(FIXTURES, 'qwen3_5-tiny', 'model');
const IMAGE = join(FIXTURES, 'images', 'coffee.png');
// npm's own CLI script: the one running this suite (npm test), else the one installed beside node.
const NPM_CLI = [process.env.npm_execpath, join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js')]
  .find((p): p is string => !!p && p.endsWith('npm-cli.js') && existsSync(p));

// A PATH with node, npm and the shell's tools, and no compiler, make or Python: what a user's machine may be.
const TOOLS = ['sh', 'bash', 'env', 'cat', 'ls', 'mkdir', 'rm', 'cp', 'mv', 'ln', 'chmod', 'uname', 'tar', 'gzip',
  'sed', 'grep', 'dirname', 'basename', 'readlink', 'realpath', 'head', 'tail', 'sort', 'tr', 'cut', 'id', 'touch', 'true', 'false'];
const COMPILERS = ['cc', 'c++', 'gcc', 'g++', 'clang', 'clang++', 'make', 'python3', 'python'];

function which(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const p = join(dir, cmd);
    if (dir && existsSync(p)) return p;
  }
  return null;
}

function bareBin(dir: string): string {
  mkdirSync(dir, { recursive: true });
  symlinkSync(process.execPath, join(dir, 'node'));
  if (!NPM_CLI) throw new Error(`npm-cli.js not found (npm_execpath=${process.env.npm_execpath})`);
  const npxCli = join(dirname(NPM_CLI), 'npx-cli.js');
  writeFileSync(join(dir, 'npm'), `#!/bin/sh\nexec "${process.execPath}" "${NPM_CLI}" "$@"\n`, { mode: 0o755 });
  writeFileSync(join(dir, 'npx'), `#!/bin/sh\nexec "${process.execPath}" "${npxCli}" "$@"\n`, { mode: 0o755 });
  for (const t of TOOLS) {
    const p = which(t);
    if (p) symlinkSync(p, join(dir, t));
  }
  return dir;
}

let work: string;
let tarball: string;
let consumer: string;
let bareEnv: NodeJS.ProcessEnv;
let installMs = 0;
let installLog = '';

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  const r = spawnSync(cmd, args, { cwd: opts.cwd ?? consumer, env: opts.env ?? bareEnv, encoding: 'utf8', timeout: 300_000 });
  return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '', error: r.error };
}

function npm(args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  return run(join(bareEnv.PATH!, 'npm'), args, opts);
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'tessera-package-'));
  bareEnv = { ...process.env, PATH: bareBin(join(work, 'bin')), npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };
  for (const k of Object.keys(bareEnv)) if (k.startsWith('npm_') && !k.startsWith('npm_config_')) delete bareEnv[k];
  delete bareEnv.CXX;
  delete bareEnv.CC;
  delete bareEnv.NODE_OPTIONS;
  delete bareEnv.VITEST;

  // npm pack runs prepare (tsc, the CommonJS bundle) and prepack (scripts/prebuild.mjs) in this checkout.
  const packed = JSON.parse(execFileSync(process.execPath, [NPM_CLI!, 'pack', '--json', '--pack-destination', work],
    { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 })) as { filename: string }[];
  tarball = join(work, packed[0]!.filename);

  consumer = join(work, 'app');
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
  const t0 = performance.now();
  const r = npm(['install', '--prefer-offline', '--foreground-scripts', tarball]);
  installMs = performance.now() - t0;
  installLog = r.stdout + r.stderr;
  if (r.code !== 0) throw new Error(`npm install of the tarball failed (${r.code}):\n${installLog}`);
}, 900_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const installed = () => join(consumer, 'node_modules', 'tessera-vision');
/** The installed package's files whose names `keep` accepts, relative to it, '/'-separated. */
const installedFiles = (keep: (name: string) => boolean) =>
  (readdirSync(installed(), { recursive: true }) as string[]).map((f) => f.split(sep).join('/')).filter((f) => !f.includes('node_modules/') && keep(f));
const declarationFiles = () => installedFiles((f) => /\.d\.[cm]?ts$/.test(f));
const packageFiles = () => installedFiles((f) => f === 'package.json' || f.endsWith('/package.json'));

describe('the published package', () => {
  it('holds the product only: no tests, tools, test kernels or source maps; a LICENSE and the prebuilt binaries', () => {
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''));
    expect(files).toContain('LICENSE');
    expect(files).toContain('CHANGELOG.md');
    expect(files).toContain('README.md');
    expect(files).toContain('dist/index.js');
    expect(files).toContain('dist/cjs/index.cjs');
    expect(files).toContain('scripts/install.mjs');
    expect(files).toContain(`prebuilds/linux-x64/tessera-vision.napi.glibc.node`);
    const unwanted = files.filter((f) => /(^|\/)(test|tests|tools|fixtures)\//.test(f) || f.endsWith('.map') || f.endsWith('.tmp') ||
      f.startsWith('build/') || f.startsWith('.github/') || /\.test\.[cm]?[jt]s$/.test(f));
    expect(unwanted).toEqual([]);
    expect(readFileSync(join(ROOT, 'LICENSE'), 'utf8')).toMatch(/Apache License\s+Version 2\.0/);
  });

  it('installs with no compiler, make or Python on PATH, compiling nothing', () => {
    for (const c of COMPILERS) expect(existsSync(join(bareEnv.PATH!, c)), c).toBe(false);
    expect(existsSync(join(installed(), 'build'))).toBe(false);  // no source build ran
    console.log(`npm install of the tarball with no compiler on PATH: ${(installMs / 1000).toFixed(1)} s`);
  });

  it('an ES module script and a CommonJS script encode an image, bit-identical to this checkout', async () => {
    const body = (imp: string) => `${imp}
const { createHash } = require_('node:crypto');
(async () => {
  const tower = await VisionTower.open(${JSON.stringify(MODEL)}, { backend: 'cpu' });
  const r = await tower.encode(${JSON.stringify(IMAGE)});
  await tower.close();
  const sha = createHash('sha256').update(new Uint8Array(r.embeddings.buffer, r.embeddings.byteOffset, r.embeddings.byteLength)).digest('hex');
  console.log(JSON.stringify({ tokens: r.tokens, width: r.width, sha, error: new TesseraError('ERR_IO', 'x').code }));
})().catch((e) => { console.error(e); process.exit(1); });
`;
    writeFileSync(join(consumer, 'app.mjs'), body(`import { VisionTower, TesseraError } from 'tessera-vision';\nimport { createRequire } from 'node:module';\nconst require_ = createRequire(import.meta.url);`));
    writeFileSync(join(consumer, 'app.cjs'), body(`const { VisionTower, TesseraError } = require('tessera-vision');\nconst require_ = require;`));
    const esm = run(process.execPath, ['app.mjs']);
    expect(esm.stderr).toBe('');
    expect(esm.code).toBe(0);
    const cjs = run(process.execPath, ['app.cjs']);
    expect(cjs.stderr).toBe('');
    expect(cjs.code).toBe(0);

    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const r = await tower.encode(IMAGE);
    await tower.close();
    const sha = createHash('sha256').update(new Uint8Array(r.embeddings.buffer, r.embeddings.byteOffset, r.embeddings.byteLength)).digest('hex');
    const want = { tokens: r.tokens, width: r.width, sha, error: 'ERR_IO' };
    expect(JSON.parse(esm.stdout)).toEqual(want);
    expect(JSON.parse(cjs.stdout)).toEqual(want);
  });

  it('the subpaths: tessera-vision/fleet and tessera-vision/bulk load by require and by import; the bulk internals are not in the main entry', () => {
    // The fleet's peers (bullmq, ioredis) are not installed here: they come from this checkout, as an app installs them.
    const env = { ...bareEnv, NODE_PATH: join(ROOT, 'node_modules') };
    writeFileSync(join(consumer, 'sub.cjs'), `const main = require('tessera-vision');
const fleet = require('tessera-vision/fleet');
const bulk = require('tessera-vision/bulk');
// One module graph: the entries share their classes.
const same = require('tessera-vision/bulk').runBulk === bulk.runBulk;
console.log(JSON.stringify({ createWorker: typeof fleet.createWorker, runBulk: typeof bulk.runBulk, collectInputs: typeof bulk.collectInputs, inMain: typeof main.collectInputs, same }));
`);
    const cjs = run(process.execPath, ['sub.cjs'], { env });
    expect(cjs.stderr).toBe('');
    expect(JSON.parse(cjs.stdout)).toEqual({ createWorker: 'function', runBulk: 'function', collectInputs: 'function', inMain: 'undefined', same: true });
    writeFileSync(join(consumer, 'sub.mjs'), `import { runBulk, Manifest } from 'tessera-vision/bulk';
import * as main from 'tessera-vision';
console.log(JSON.stringify({ runBulk: typeof runBulk, Manifest: typeof Manifest, inMain: typeof main.Manifest }));
`);
    const esm = run(process.execPath, ['sub.mjs']);
    expect(esm.stderr).toBe('');
    expect(JSON.parse(esm.stdout)).toEqual({ runBulk: 'function', Manifest: 'function', inMain: 'undefined' });
  });

  it('`npx tessera encode <image>` runs the demo tower', () => {
    const out = join(consumer, 'coffee.safetensors');
    const r = run(join(bareEnv.PATH!, 'npx'), ['--no-install', 'tessera', 'encode', IMAGE, '--out', out]);
    expect(r.stderr).toContain('demo tower');
    expect(r.code).toBe(0);
    expect(readFileSync(out).readBigUInt64LE(0)).toBeGreaterThan(0n);
  });

  it('installs neither the fleet\'s optional peers nor the bench\'s packages; `tessera worker` names the install command', () => {
    for (const p of ['bullmq', 'ioredis', 'msgpackr-extract', 'onnxruntime-node', 'onnx-proto']) expect(existsSync(join(consumer, 'node_modules', p)), p).toBe(false);
    const r = run(join(bareEnv.PATH!, 'npx'), ['--no-install', 'tessera', 'worker', '--redis', 'redis://127.0.0.1:9', '--queue', 'q', '--model', MODEL, '--out-dir', join(consumer, 'out')]);
    expect(r.stderr).toContain('ERR_BACKEND_UNAVAILABLE');
    expect(r.stderr).toContain('npm install bullmq ioredis');
    expect(r.code).toBe(2);
  });

  it('`npx tessera doctor --json` runs the shipped fixture towers (dist/doctor-fixtures) and agrees with HF', () => {
    const r = run(join(bareEnv.PATH!, 'npx'), ['--no-install', 'tessera', 'doctor', '--json', '--backend', 'cpu']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { verdict: { ok: boolean }; towers: { name: string; runs: { backend: string; ok: boolean }[] }[] };
    expect(report.verdict.ok).toBe(true);
    expect(report.towers.map((t) => t.name)).toEqual(['qwen3_5-tiny/rocket_thin', 'gemma4-tiny/rocket_thin']);
    for (const t of report.towers) expect(t.runs).toEqual([expect.objectContaining({ backend: 'cpu', ok: true })]);
    expect(existsSync(join(installed(), 'dist', 'doctor-fixtures', 'doctor-counts.json'))).toBe(true);
  });

  it('no published declaration mentions zod', () => {
    const names = declarationFiles();
    for (const entry of ['dist/index.d.ts', 'dist/fleet/index.d.ts', 'dist/bulk/index.d.ts', 'dist/cjs/index.d.ts', 'dist/cjs/fleet/index.d.ts', 'dist/cjs/bulk/index.d.ts'])
      expect(names).toContain(entry);
    expect(names.filter((f) => /zod/i.test(readFileSync(join(installed(), f), 'utf8')))).toEqual([]);
  });

  it('an ESM (.ts) and a CommonJS (.cts) consumer type-check against the declarations alone, zod not resolvable', () => {
    // The installed package's declarations and package.json files (the exports map; dist/cjs's
    // {"type": "commonjs"}) in a project of their own, where no zod can be found: our types must read
    // without it. The fleet's peers are there, as in an app that uses the fleet (its types name them).
    const typed = join(work, 'typed');
    const pkg = join(typed, 'node_modules', 'tessera-vision');
    for (const f of [...declarationFiles(), ...packageFiles()]) {
      mkdirSync(dirname(join(pkg, f)), { recursive: true });
      copyFileSync(join(installed(), f), join(pkg, f));
    }
    for (const peer of ['bullmq', 'ioredis']) symlinkSync(join(ROOT, 'node_modules', peer), join(typed, 'node_modules', peer), 'dir');
    expect(() => createRequire(join(pkg, 'dist', 'index.d.ts')).resolve('zod')).toThrow(/Cannot find module 'zod'/);
    // "type": "module": esm.ts is an ES module (it resolves the `import` declarations), cjs.cts CommonJS (the `require` ones).
    writeFileSync(join(typed, 'package.json'), JSON.stringify({ name: 'typed-consumer', version: '1.0.0', private: true, type: 'module' }));

    writeFileSync(join(typed, 'esm.ts'), `import { VisionTower, TesseraError, type EncodeResult, type OpenOptions, type PixelInput } from 'tessera-vision';
import { createWorker, enqueueGroups, enqueueImages, type GroupJob, type ImageJob, type JobOptions } from 'tessera-vision/fleet';
import { OUTPUT_FORMATS, collectInputs, runBulk, type BulkRunOptions, type OutputFormat } from 'tessera-vision/bulk';
import type { Queue } from 'bullmq';

const open: OpenOptions = { backend: 'cpu', residency: 'stream', slots: 2, threads: 0, precision: 'bf16', verify: false };
// @ts-expect-error 'gpu' is not a backend
export const wrong: OpenOptions = { backend: 'gpu' };

export async function tokens(path: string): Promise<number> {
  const tower = await VisionTower.open(path, open);
  const ok: EncodeResult = await tower.encode('page.png', { maxSoftTokens: 280, checkFinite: true });
  // @ts-expect-error 100 is not a Gemma 4 budget
  const bad = await tower.encode('page.png', { maxSoftTokens: 100 });
  const pixels: PixelInput = { pixelValues: new Float32Array(1536), grid: [1, 2, 2] };
  const e: TesseraError | null = null;
  return ok.tokens + bad.tokens + (await tower.encodePixels(pixels)).tokens + (e === null ? 0 : 1);
}

export async function fleet(queue: Queue, tower: VisionTower): Promise<number> {
  const options: JobOptions = { format: 'vllm', maxSoftTokens: 560 };
  const images: ImageJob[] = [{ input: '/data/a.png', rel: 'a.png', options }];
  const groups: GroupJob[] = [{ inputs: [{ input: '/data/b.png' }, { input: 'https://example.com/c.png', rel: 'c.png' }], options }];
  const worker = await createWorker({ redis: 'redis://127.0.0.1:6379', queue: 'pages', model: tower, outDir: '/out', open });
  const added = (await enqueueImages(queue, images)).length + (await enqueueGroups(queue, groups)).length;
  await worker.close();
  return added;
}

export async function bulk(tower: VisionTower): Promise<string[]> {
  const format: OutputFormat = OUTPUT_FORMATS[0];
  const run: BulkRunOptions = { encode: { batch: 4, minPixels: 3136 } };
  const statuses: string[] = [format];
  for await (const o of runBulk(tower, await collectInputs(['pages/']), run)) statuses.push(o.status);
  return statuses;
}
`);
    writeFileSync(join(typed, 'cjs.cts'), `import tessera = require('tessera-vision');
import fleet = require('tessera-vision/fleet');
import bulk = require('tessera-vision/bulk');
export async function width(path: string, options: tessera.OpenOptions, job: fleet.ImageJob): Promise<number> {
  const tower = await tessera.VisionTower.open(path, options);
  const inputs = await bulk.collectInputs([job.input]);
  return (await tower.encode(inputs[0]!.path)).width;
}
`);
    writeFileSync(join(typed, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false,
        types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] },
      files: ['esm.ts', 'cjs.cts'],
    }));
    const r = run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: typed });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('a missing addon is ERR_BACKEND_UNAVAILABLE naming the fix and the prebuilt platforms', () => {
    writeFileSync(join(consumer, 'missing.mjs'), `import { VisionTower } from 'tessera-vision';
VisionTower.open(${JSON.stringify(MODEL)}, { backend: 'cpu' }).then(() => console.log('opened'), (e) => console.log(JSON.stringify({ code: e.code, message: e.message })));
`);
    // node-gyp-build's <NAME>_PREBUILD override points the loader at an empty folder: no build, no prebuilds.
    const r = run(process.execPath, ['missing.mjs'], { env: { ...bareEnv, TESSERA_VISION_PREBUILD: join(work, 'nothing-here') } });
    const e = JSON.parse(r.stdout) as { code: string; message: string };
    expect(e.code).toBe('ERR_BACKEND_UNAVAILABLE');
    expect(e.message).toContain('npm rebuild tessera-vision');
    expect(e.message).toContain('npm install-scripts approve tessera-vision'); // npm 11 skips dependencies' install scripts until approved
    expect(e.message).toContain('linux-x64');
  });

  it('with no prebuilt binary for the platform and no compiler, the install names what is missing', () => {
    // npm_config_arch makes node-gyp-build look for another platform's binary (none ships for riscv64).
    const r = run(process.execPath, [join(installed(), 'scripts', 'install.mjs')], { cwd: installed(), env: { ...bareEnv, npm_config_arch: 'riscv64' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no prebuilt addon loads on linux-riscv64');
    expect(r.stderr).toMatch(/missing a C\+\+20 compiler .*, make .*, Python 3/);
    expect(r.stderr).toContain('npm rebuild tessera-vision');
  });
});

describe('the linux-arm64 prebuilt binary', () => {
  const qemu = ['qemu-aarch64', 'qemu-aarch64-static'].find((q) => which(q));
  const cc = which('aarch64-linux-gnu-gcc');
  const sysroot = '/usr/aarch64-linux-gnu';

  it('is an arm64 shared object', () => {
    const dir = join(installed(), 'prebuilds', 'linux-arm64');
    if (!existsSync(dir) && !cc) {
      console.warn('skipped: no linux-arm64 prebuild was made: no arm64 cross compiler (Debian: apt-get install g++-aarch64-linux-gnu)');
      return;
    }
    const elf = readFileSync(join(dir, readdirSync(dir)[0]!));
    expect(elf.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
    expect(elf[4]).toBe(2);                          // 64-bit
    expect(elf.readUInt16LE(16)).toBe(3);            // ET_DYN
    expect(elf.readUInt16LE(18)).toBe(183);          // EM_AARCH64
  });

  it('loads under qemu-user (dlopen, the Node-API entry point found)', () => {
    if (!qemu || !cc || !existsSync(sysroot)) {
      console.warn('skipped: needs qemu-user and g++-aarch64-linux-gnu (Debian: apt-get install qemu-user g++-aarch64-linux-gnu)');
      return;
    }
    const dir = join(installed(), 'prebuilds', 'linux-arm64');
    const addonFile = join(dir, readdirSync(dir)[0]!);
    // Node's exports stood in by stubs: one per Node-API function the addon imports.
    const nm = execFileSync(which('aarch64-linux-gnu-nm') ?? 'nm', ['-D', '--undefined-only', addonFile], { encoding: 'utf8' });
    const napi = [...nm.matchAll(/\b((?:napi|node_api)_\w+)/g)].map((m) => m[1]!);
    expect(napi.length).toBeGreaterThan(10);
    const stubs = join(work, 'napi-stubs.c');
    writeFileSync(stubs, [...new Set(napi)].map((n) => `void ${n}(void) {}\n`).join(''));
    const loader = join(work, 'dlopen-addon');
    execFileSync(cc, ['-O1', '-rdynamic', '-o', loader, join(ROOT, 'test', 'helpers', 'dlopen-addon.c'), stubs, '-ldl']);
    const r = spawnSync(qemu, ['-L', sysroot, loader, addonFile], { encoding: 'utf8', timeout: 120_000 });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('napi_register_module_v1 found');
    expect(r.status).toBe(0);
  });
});

// The same tarball on "Windows": npm run by the official node.exe under Wine installs it for win32-x64
// (test/helpers/wine.ts; docs/windows.md says what this proves and what only Windows shows).
const wineMissingReason = wineMissing();
if (wineMissingReason) console.warn(`skipped: the win32-x64 package under Wine: ${wineMissingReason}`);

describe.skipIf(wineMissingReason)('the win32-x64 package under Wine', () => {
  const IMAGES = ['coffee.png', 'astronaut.jpg', 'astronaut_rgba.png', 'camera_gray.png', 'chelsea_exif6.jpg', 'chelsea_palette.png']
    .map((f) => join(FIXTURES, 'images', f));
  let node: string, app: string, installOut: { code: number | null; stdout: string; stderr: string };
  beforeAll(() => {
    node = nodeExe();
    winePrefix();
    installPrngStub();
    app = join(work, 'win-app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'win-consumer', version: '1.0.0', private: true }));
    const cache = execFileSync(process.execPath, [NPM_CLI!, 'config', 'get', 'cache'], { encoding: 'utf8' }).trim();
    // npm under Wine fails to fetch a tarball into its cache (an UNKNOWN error, three attempts), and drops
    // the optional package silently: Linux npm puts sharp's win32 package in the shared cache first.
    const sharpPkg = JSON.parse(readFileSync(createRequire(import.meta.url).resolve('sharp/package.json'), 'utf8')) as { optionalDependencies: Record<string, string> };
    execFileSync(process.execPath, [NPM_CLI!, 'cache', 'add', `@img/sharp-win32-x64@${sharpPkg.optionalDependencies['@img/sharp-win32-x64']}`], { stdio: 'ignore' });
    const t0 = performance.now();
    // --ignore-scripts: Wine 8's cmd.exe runs the right side of `a || b` whatever a's exit status, so
    // sharp's install script (`node install/check.js || npm run build`) would always try to build.
    // tessera-vision's own install step then runs as npm would run it, with node.exe.
    installOut = runWine(node, [winPath(NPM_CLI!), 'install', '--os=win32', '--cpu=x64', '--prefer-offline', '--ignore-scripts',
      '--no-audit', '--no-fund', '--cache', winPath(cache), winPath(tarball)], { cwd: app });
    if (installOut.code === 0)
      installOut = runWine(node, [winPath(join(app, 'node_modules', 'tessera-vision', 'scripts', 'install.mjs'))], { cwd: join(app, 'node_modules', 'tessera-vision') });
    console.log(`npm install of the tarball by node.exe under Wine: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }, 900_000);

  it('npm run by node.exe installs it with no compiler: the prebuilt addon and sharp\'s win32 binaries', () => {
    expect(installOut.code, `${installOut.stdout}\n${installOut.stderr}`).toBe(0);
    expect(installOut.stderr).toBe('');  // the install step found the prebuilt addon loading: nothing to say
    const pkg = join(app, 'node_modules', 'tessera-vision');
    expect(readdirSync(join(pkg, 'prebuilds', 'win32-x64'))).toEqual(['tessera-vision.napi.node']);
    expect(existsSync(join(pkg, 'build'))).toBe(false);  // no source build ran
    expect(existsSync(join(app, 'node_modules', '@img', 'sharp-win32-x64'))).toBe(true);
    const dll = readFileSync(join(pkg, 'prebuilds', 'win32-x64', 'tessera-vision.napi.node'));
    expect(dll.subarray(0, 2).toString('latin1')).toBe('MZ');
    expect(dll.readUInt16LE(dll.readUInt32LE(0x3c) + 4)).toBe(0x8664);  // IMAGE_FILE_MACHINE_AMD64
  });

  it('node.exe runs every fixture family\'s tower in stream, mapped and resident residency within 1e-4 of HF; sharp\'s win32 build decodes the fixture images as its Linux build does; the library encodes as on Linux', async () => {
    const t0 = performance.now();
    const r = runWine(node, [winPath(join(ROOT, 'test', 'helpers', 'win32-consumer.mjs')), winPath(app), winPath(FIXTURES), ...IMAGES.map(winPath)], { cwd: app });
    console.log(`fixture towers, sharp and an encode under Wine: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as {
      towers: { tower: string; residency: string; stages: Record<string, number | null> }[];
      images: { width: number; height: number; channels: number; sha: string }[];
      encode: { tokens: number; width: number; sha: string };
    };
    const families = new Set(out.towers.map((t) => t.tower.split('/')[0]));
    expect([...families]).toEqual(['qwen3_5-tiny', 'qwen3_vl-tiny', 'gemma4-tiny']);
    for (const t of out.towers) {
      expect(Object.keys(t.stages).length, t.tower).toBeGreaterThan(2);
      for (const [stage, err] of Object.entries(t.stages)) expect(err, `${t.tower} ${t.residency} ${stage}`).not.toBeNull();
      const worst = Math.max(...Object.values(t.stages).map(Number));
      expect(worst, `${t.tower} ${t.residency}`).toBeLessThan(1e-4);
    }
    expect(out.towers.map((t) => t.residency)).toEqual([...families].flatMap(() => ['stream', 'mapped', 'resident']));

    const sharp = createRequire(import.meta.url)('sharp') as typeof import('sharp');
    const images = await Promise.all(IMAGES.map(async (image) => {
      const { data, info } = await sharp(image).raw().toBuffer({ resolveWithObject: true });
      return { width: info.width, height: info.height, channels: info.channels, sha: createHash('sha256').update(data).digest('hex') };
    }));
    expect(out.images.map(({ width, height, channels, sha }) => ({ width, height, channels, sha }))).toEqual(images);

    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const e = await tower.encode(IMAGES[0]!);
    await tower.close();
    const sha = createHash('sha256').update(new Uint8Array(e.embeddings.buffer, e.embeddings.byteOffset, e.embeddings.byteLength)).digest('hex');
    expect(out.encode).toEqual({ tokens: e.tokens, width: e.width, sha });
  }, 600_000);

  it('`tessera encode --model` run by node.exe writes the embeddings the library gives', async () => {
    const outFile = join(app, 'coffee.safetensors');
    const cli = join(app, 'node_modules', 'tessera-vision', 'dist', 'cli', 'main.js');
    const r = runWine(node, [winPath(cli), 'encode', winPath(IMAGES[0]!), '--model', winPath(MODEL), '--out', winPath(outFile)], { cwd: app });
    expect(r.code, r.stderr).toBe(0);
    const tower = await VisionTower.open(MODEL, { backend: 'cpu' });
    const e = await tower.encode(IMAGES[0]!);
    await tower.close();
    const file = readFileSync(outFile);
    const n = Number(file.readBigUInt64LE(0));
    const header = JSON.parse(file.subarray(8, 8 + n).toString('utf8')) as Record<string, { data_offsets: [number, number] }>;
    expect(header['image.0.embeddings'], Object.keys(header).join(', ')).toBeDefined();
    const [b, end] = header['image.0.embeddings']!.data_offsets;
    expect(Buffer.from(file.subarray(8 + n + b, 8 + n + end)).equals(Buffer.from(e.embeddings.buffer, e.embeddings.byteOffset, e.embeddings.byteLength))).toBe(true);
  }, 300_000);
});
