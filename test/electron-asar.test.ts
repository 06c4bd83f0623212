// An Electron app's layout, as docs/platforms.md#electron sets it up: the app's node_modules packed
// into app.asar by @electron/asar with the unpack rules (tessera, sharp, @img), then loaded with
// plain Node the way Electron resolves modules: every file a path inside app.asar names, read from
// the archive, except the unpacked ones, read from app.asar.unpacked (Electron's fs does this). The
// view is rebuilt on disk: packed files extracted from the archive, unpacked ones as links into
// app.asar.unpacked, so the addons are dlopen'ed from there as Electron does. Electron itself is not
// needed: what breaks a packaged app is a binary left inside the archive.
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import asar from '@electron/asar';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const UNPACK = '{**/node_modules/tessera-vision/**,**/node_modules/sharp/**,**/node_modules/@img/**}';
const work = mkdtempSync(join(tmpdir(), 'tessera-electron-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** tessera's run-time dependencies, and theirs, as installed in this checkout (npm's flat layout). */
function runtimePackages(): string[] {
  const seen = new Set<string>();
  const visit = (name: string) => {
    const dir = join(ROOT, 'node_modules', name);
    if (seen.has(name) || !existsSync(join(dir, 'package.json'))) return; // an optional one for another platform
    seen.add(name);
    const p = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { dependencies?: object; optionalDependencies?: object };
    for (const d of Object.keys({ ...p.dependencies, ...p.optionalDependencies })) visit(d);
  };
  const own = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: object };
  for (const d of Object.keys(own.dependencies)) visit(d);
  return [...seen];
}

describe('an Electron app packed with asar', () => {
  it('leaves every native file (addon, sharp, libvips) out of the archive, and loads and encodes from the unpacked tree', async () => {
    const app = join(work, 'app');
    const modules = join(app, 'node_modules');
    // tessera as installed: its package.json, dist/ and the addon node-gyp-build finds (build/Release).
    const tessera = join(modules, 'tessera-vision');
    mkdirSync(join(tessera, 'build', 'Release'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(tessera, 'package.json'));
    cpSync(join(ROOT, 'dist'), join(tessera, 'dist'), { recursive: true });
    cpSync(join(ROOT, 'build', 'Release', 'tessera.node'), join(tessera, 'build', 'Release', 'tessera.node'));
    for (const name of runtimePackages()) cpSync(join(ROOT, 'node_modules', name), join(modules, name), { recursive: true, dereference: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', main: 'main.js' }));
    cpSync(join(ROOT, 'test', 'fixtures', 'qwen3_vl-tiny', 'model'), join(app, 'model'), { recursive: true });
    writeFileSync(join(app, 'main.js'), `const { VisionTower } = require('tessera-vision');
(async () => {
  const tower = await VisionTower.open(require('node:path').join(__dirname, 'model'), { backend: 'cpu' });
  const r = await tower.encode(${JSON.stringify(join(ROOT, 'test', 'fixtures', 'images', 'coffee.png'))}, { maxPixels: 32768 });
  await tower.close();
  // The files the loaded binaries are (the dynamic linker follows the links, as Electron's rewrite does).
  const maps = process.report.getReport().sharedObjects.filter((f) => /\\.node$|libvips/.test(f)).map((f) => require('node:fs').realpathSync(f));
  console.log(JSON.stringify({ tokens: r.tokens, native: [...new Set(maps)] }));
})().catch((e) => { console.error(e); process.exit(1); });
`);

    const archive = join(work, 'resources', 'app.asar');
    mkdirSync(dirname(archive), { recursive: true });
    await asar.createPackageWithOptions(app, archive, { unpack: UNPACK });

    // Inside the archive: no binary. tessera's and sharp's files are all unpacked; zod stays packed.
    const header = asar.getRawHeader(archive).header as AsarDir;
    const files = walk(header, '');
    const packed = files.filter((f) => !f.unpacked).map((f) => f.path);
    expect(packed.filter((p) => /\.(node|so(\.\d+)*|dylib|dll|metallib)$/.test(p))).toEqual([]);
    expect(packed.some((p) => p.startsWith('/node_modules/zod/'))).toBe(true);
    expect(files.filter((f) => f.path.startsWith('/node_modules/tessera-vision/') && !f.unpacked)).toEqual([]);
    expect(existsSync(join(archive + '.unpacked', 'node_modules', 'tessera-vision', 'build', 'Release', 'tessera.node'))).toBe(true);
    expect(files.some((f) => f.path.startsWith('/node_modules/@img/') && f.unpacked)).toBe(true);

    // Electron's view of app.asar: packed files from the archive, unpacked ones from app.asar.unpacked.
    const view = join(work, 'view', 'app.asar');
    for (const f of files) {
      const to = join(view, f.path);
      mkdirSync(dirname(to), { recursive: true });
      if (f.unpacked) symlinkSync(join(archive + '.unpacked', f.path), to);
      else writeFileSync(to, asar.extractFile(archive, f.path.slice(1)));
    }
    // Module paths stay inside app.asar (Electron never resolves them to app.asar.unpacked, so zod, packed,
    // is found from the unpacked tessera): node keeps the links' own paths with --preserve-symlinks.
    const r = spawnSync(process.execPath, ['--preserve-symlinks', '--preserve-symlinks-main', join(view, 'main.js')], { encoding: 'utf8', cwd: work, timeout: 120_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout) as { tokens: number; native: string[] };
    expect(out.tokens).toBe(24);
    // The addon and sharp's binaries were loaded from app.asar.unpacked, as Electron loads them.
    expect(out.native.some((f) => f.endsWith('/app.asar.unpacked/node_modules/tessera-vision/build/Release/tessera.node'))).toBe(true);
    expect(out.native.some((f) => f.includes('/app.asar.unpacked/node_modules/@img/'))).toBe(true);
    expect(out.native.filter((f) => !f.includes('/app.asar.unpacked/'))).toEqual([]);
  });
});

interface AsarDir {
  files: Record<string, AsarDir | { size: number; unpacked?: boolean; link?: string }>;
}

function walk(dir: AsarDir, at: string): { path: string; unpacked: boolean }[] {
  const out: { path: string; unpacked: boolean }[] = [];
  for (const [name, e] of Object.entries(dir.files)) {
    if ('files' in e) out.push(...walk(e as AsarDir, `${at}/${name}`));
    else if (!('link' in e)) out.push({ path: `${at}/${name}`, unpacked: Boolean((e as { unpacked?: boolean }).unpacked) });
  }
  return out;
}
