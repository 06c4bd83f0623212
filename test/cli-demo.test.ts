// The demo tower's home: the user's cache folder on each system (src/cli/demo.ts), never the
// package folder, which a packaged app (Electron's asar, a read-only install) cannot write.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { demoTowerPath, userCacheDir } from '../src/cli/demo.js';
import { tesseraVersion } from '../src/version.js';

const tmp = mkdtempSync(join(tmpdir(), 'tessera-demo-home-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('the demo tower', () => {
  it("is cached where each system keeps caches", () => {
    expect(userCacheDir({ XDG_CACHE_HOME: '/x/cache' }, 'linux', '/home/u')).toBe('/x/cache');
    expect(userCacheDir({}, 'linux', '/home/u')).toBe('/home/u/.cache');
    // A relative XDG_CACHE_HOME is ignored (the XDG spec).
    expect(userCacheDir({ XDG_CACHE_HOME: 'rel' }, 'linux', '/home/u')).toBe('/home/u/.cache');
    expect(userCacheDir({ XDG_CACHE_HOME: '/x/cache' }, 'darwin', '/Users/u')).toBe('/Users/u/Library/Caches');
    expect(userCacheDir({ LOCALAPPDATA: 'C:\\Users\\u\\AppData\\Local' }, 'win32', 'C:\\Users\\u')).toBe('C:\\Users\\u\\AppData\\Local');
  });

  it('is generated in the cache folder (XDG_CACHE_HOME on Linux), once, and not in the package', async () => {
    const dir = await demoTowerPath({ XDG_CACHE_HOME: tmp });
    expect(dir).toBe(join(userCacheDir({ XDG_CACHE_HOME: tmp }), 'tessera-vision', tesseraVersion(), 'qwen3_5-random'));
    expect(existsSync(join(dir, 'model.safetensors'))).toBe(true);
    expect(await demoTowerPath({ XDG_CACHE_HOME: tmp })).toBe(dir);
  });
});
