// tessera's own version, as package.json gives it: written into output records (the CLI's files and
// the fleet's) and printed by `tessera --version`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './package-root.js';

let cached: string | undefined;

export function tesseraVersion(): string {
  if (cached) return cached;
  try {
    cached = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
  return cached;
}
