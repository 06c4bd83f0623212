// Opening a packed folder: the manifest becomes the TowerSpec (source 'packed'), the weights file
// its only file. loadModel() dispatches here when the folder holds tessera-pack.json.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { TesseraError } from '../errors.js';
import { openRegular, readRegular } from '../io/open-regular.js';
import { MAX_JSON_FILE_BYTES } from '../io/read-json.js';
import type { TowerSpec } from '../spec/types.js';
import { verifyChecksums } from './checksum.js';
import { MANIFEST_FILE, parseManifest, specFromManifest } from './manifest.js';

export async function isPackedFolder(dir: string): Promise<boolean> {
  try {
    return (await stat(join(dir, MANIFEST_FILE))).isFile();
  } catch {
    return false;
  }
}

export async function loadPacked(
  dir: string,
  options: { verify: boolean } = { verify: false },
): Promise<{ spec: TowerSpec; preprocessorConfig: Record<string, unknown> | undefined }> {
  const where = join(dir, MANIFEST_FILE);
  const text = await readRegular(where, {
    what: 'pack manifest',
    notFound: 'ERR_MODEL_NOT_FOUND',
    notRegular: 'ERR_MODEL_FORMAT',
    maxBytes: MAX_JSON_FILE_BYTES,
    tooLarge: (size) => new TesseraError('ERR_WEIGHTS_CORRUPT', `${where}: ${size} bytes, over the ${MAX_JSON_FILE_BYTES}-byte limit`),
  });
  const manifest = parseManifest(text.toString('utf8'), where);
  const weights = join(dir, manifest.weights);
  const { handle, size } = await openRegular(weights, { what: `weights file (named by ${where})`, notFound: 'ERR_MODEL_NOT_FOUND', notRegular: 'ERR_MODEL_FORMAT' });
  try {
    const spec = specFromManifest(manifest, weights, size, where);
    if (options.verify) await verifyChecksums(manifest, handle, weights, where);
    return { spec, preprocessorConfig: manifest.preprocessorConfig ?? undefined };
  } finally {
    await handle.close();
  }
}
