// An HF checkpoint folder: config.json, preprocessor_config.json (optional here; the family
// decides whether it needs it) and the weights: model.safetensors, a sharded set listed by
// model.safetensors.index.json, or the folder's *.safetensors files. Only headers are read.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { TesseraError } from '../errors.js';
import { readJsonFile } from '../io/read-json.js';
import { readSafetensorsHeader } from './safetensors.js';
import type { TensorIndex } from './tensor-index.js';

export interface HfFolder {
  dir: string;
  config: Record<string, unknown>;
  preprocessorConfig: Record<string, unknown> | undefined;
  index: TensorIndex;
}

const readJson = (path: string, what: string) => readJsonFile(path, what, 'ERR_CONFIG_INVALID');

async function weightFiles(dir: string): Promise<string[]> {
  const indexPath = join(dir, 'model.safetensors.index.json');
  const index = await readJson(indexPath, 'the shard index');
  if (index) {
    const map = index['weight_map'];
    if (typeof map !== 'object' || map === null)
      throw new TesseraError('ERR_WEIGHTS_CORRUPT', `${indexPath}: no weight_map`);
    // Each shard is a .safetensors file in the folder itself; the refusal names the tensor that points elsewhere.
    for (const [tensor, f] of Object.entries(map as Record<string, unknown>)) {
      if (!(typeof f === 'string' && !f.includes('/') && !f.includes('\\') && f.endsWith('.safetensors')))
        throw new TesseraError('ERR_WEIGHTS_CORRUPT', `${indexPath}: weight_map gives tensor '${tensor}' the file ${JSON.stringify(f)}, not a .safetensors file in the folder`);
    }
    return [...new Set(Object.values(map as Record<string, string>))].sort();
  }
  const entries = await readdir(dir);
  if (entries.includes('model.safetensors')) return ['model.safetensors'];
  const shards = entries.filter((e) => e.endsWith('.safetensors')).sort();
  if (shards.length === 0)
    throw new TesseraError('ERR_MODEL_NOT_FOUND', `${dir}: no model.safetensors, shard index or *.safetensors file`);
  return shards;
}

export async function readHfFolder(dir: string): Promise<HfFolder> {
  let info;
  try {
    info = await stat(dir);
  } catch {
    throw new TesseraError('ERR_MODEL_NOT_FOUND', `model path ${dir} does not exist`);
  }
  if (!info.isDirectory()) throw new TesseraError('ERR_MODEL_FORMAT', `${dir} is neither a folder nor a GGUF file`);
  const config = await readJson(join(dir, 'config.json'), 'config.json');
  if (!config) throw new TesseraError('ERR_MODEL_NOT_FOUND', `${dir}: no config.json`);
  // Newer hub checkpoints (Gemma 4) keep the image processor's settings in processor_config.json.
  const processor = await readJson(join(dir, 'processor_config.json'), 'processor_config.json');
  const nested = processor?.['image_processor'];
  const preprocessorConfig =
    (await readJson(join(dir, 'preprocessor_config.json'), 'preprocessor_config.json')) ??
    (typeof nested === 'object' && nested !== null && !Array.isArray(nested) ? (nested as Record<string, unknown>) : undefined);

  const names = await weightFiles(dir);
  const files = names.map((n) => join(dir, n));
  const index: TensorIndex = { files, tensors: new Map() };
  const headers = await Promise.all(files.map((f, i) => readSafetensorsHeader(f, i)));
  for (const h of headers)
    for (const t of h.tensors) {
      if (index.tensors.has(t.name))
        throw new TesseraError('ERR_WEIGHTS_CORRUPT', `tensor '${t.name}' appears in more than one weights file`);
      index.tensors.set(t.name, t);
    }
  return { dir, config, preprocessorConfig, index };
}
