// Model path → TowerSpec: which kind of source it is (HF folder, GGUF file, packed folder) and
// which family (the family registry, src/families/registry.ts), dispatched to the family's builder or
// the packed reader (pack/). It sits above both, so that neither imports the other's loader: pack/
// builds on spec/'s types, never the reverse.
import { stat } from 'node:fs/promises';
import { TesseraError } from './errors.js';
import { openRegular } from './io/open-regular.js';
import { ggufKind, readGgufHeader } from './formats/gguf.js';
import { readHfFolder } from './formats/hf-folder.js';
import { isPackedFolder, loadPacked } from './pack/load.js';
import { familyForGguf, familyForModelType, GGUF_PROJECTORS, MODEL_TYPES } from './families/registry.js';
import type { LoadedModel } from './spec/types.js';

export type { LoadedModel };

async function isGguf(path: string): Promise<boolean> {
  const { handle: fh } = await openRegular(path, { what: 'model file', notFound: 'ERR_MODEL_NOT_FOUND', notRegular: 'ERR_MODEL_FORMAT' });
  try {
    const magic = Buffer.alloc(4);
    const { bytesRead } = await fh.read(magic, 0, 4, 0);
    return bytesRead === 4 && magic.toString('latin1') === 'GGUF';
  } finally {
    await fh.close();
  }
}

export interface LoadOptions {
  /** Packed folders: check every stage against its recorded checksum before opening. */
  verify?: boolean;
}

export async function loadModel(path: string, options: LoadOptions = {}): Promise<LoadedModel> {
  let info;
  try {
    info = await stat(path);
  } catch {
    throw new TesseraError('ERR_MODEL_NOT_FOUND', `model path ${path} does not exist`);
  }
  if (!info.isFile() && !info.isDirectory())
    throw new TesseraError('ERR_MODEL_FORMAT', `model path ${path} is neither a folder nor a regular file (a FIFO, device or socket)`);
  if (options.verify && !(info.isDirectory() && (await isPackedFolder(path))))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `VisionTower.open: verify is for packed folders (tessera pack), which record checksums; ${path} is not one`);
  if (info.isFile()) {
    // GGUF: a llama.cpp mmproj or an Ollama single file, read by the family that claims it.
    if (await isGguf(path)) {
      const header = await readGgufHeader(path);
      const family = familyForGguf(header);
      if (family?.gguf) {
        const spec = family.gguf.build(header);
        return { spec, preprocessorConfig: family.gguf.processor?.(header, spec), path };
      }
      const { arch, projector } = ggufKind(header);
      if (arch === 'clip')
        throw new TesseraError(
          'ERR_MODEL_FORMAT',
          `${path}: mmproj projector type '${projector ?? '(none)'}' is not one tessera runs (${GGUF_PROJECTORS.join(', ')})`,
        );
      // A model's language half (llama.cpp keeps the vision tower in a separate mmproj file) has no v.* tensors.
      if (![...header.tensors.keys()].some((n) => n.startsWith('v.')))
        throw new TesseraError(
          'ERR_MODEL_FORMAT',
          `${path}: a language-model GGUF (architecture '${arch ?? '(none)'}') with no vision tower: open the model's mmproj file (mmproj-*.gguf, published beside it) instead`,
        );
      throw new TesseraError('ERR_MODEL_FORMAT', `${path}: GGUF architecture '${arch ?? '(none)'}' is not a vision file tessera opens`);
    }
    throw new TesseraError('ERR_MODEL_FORMAT', `${path} is not a GGUF file (bad magic) nor a model folder`);
  }
  if (await isPackedFolder(path)) return { ...(await loadPacked(path, { verify: options.verify ?? false })), path };
  const folder = await readHfFolder(path);
  const modelType = folder.config['model_type'];
  const family = familyForModelType(modelType);
  if (family) return { spec: family.fromHfFolder(folder), preprocessorConfig: folder.preprocessorConfig, path };
  throw new TesseraError(
    'ERR_MODEL_FORMAT',
    `${path}/config.json: model_type ${JSON.stringify(modelType)} is not a tower tessera knows (${MODEL_TYPES.join(', ')})`,
  );
}
