// Opening a packed folder: the manifest becomes the TowerSpec (source 'packed'), the weights file
// its only file. loadModel() dispatches here when the folder holds tessera-pack.json.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { TesseraError } from '../errors.js';
import type { TowerSpec } from '../spec/types.js';
import { MANIFEST_FILE, parseManifest, specFromManifest } from './manifest.js';

export async function isPackedFolder(dir: string): Promise<boolean> {
  try {
    return (await stat(join(dir, MANIFEST_FILE))).isFile();
  } catch {
    return false;
  }
}

export async function loadPacked(dir: string): Promise<{ spec: TowerSpec; preprocessorConfig: Record<string, unknown> | undefined }> {
  const where = join(dir, MANIFEST_FILE);
  const manifest = parseManifest(await readFile(where, 'utf8'), where);
  const weights = join(dir, manifest.weights);
  let bytes: number;
  try {
    bytes = (await stat(weights)).size;
  } catch {
    throw new TesseraError('ERR_MODEL_NOT_FOUND', `${where} names weights file ${manifest.weights}, which is missing`);
  }
  return { spec: specFromManifest(manifest, weights, bytes, where), preprocessorConfig: manifest.preprocessorConfig ?? undefined };
}
