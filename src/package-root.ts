// The installed package's root folder (package.json, build/, prebuilds/, demo/). Found by walking up from
// this module's own file, so that it is the same folder whether this code runs from the ES module build
// (dist/) or from the CommonJS bundle (dist/cjs/index.cjs), which sit at different depths.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const PACKAGE_NAME = 'tessera-vision';

let cached: string | undefined;

export function packageRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === PACKAGE_NAME) return (cached = dir);
      } catch {
        // dist/cjs/package.json and other unrelated manifests: keep walking up.
      }
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`${PACKAGE_NAME}: package.json not found above ${fileURLToPath(import.meta.url)}`);
    dir = up;
  }
}
