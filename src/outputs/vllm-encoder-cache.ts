// --format vllm-encoder-cache: vLLM's disaggregated-encoder storage, written by tessera in place of
// a vLLM encoder instance. vLLM's ECExampleConnector
// (vllm/distributed/ec_transfer/ec_connector/example_connector.py) loads, for a multimodal item
// whose identifier is ID, the file
//   <shared_storage_path>/<ID>/encoder_cache.safetensors      tensor "ec_cache"
// into its encoder cache, and the model then takes those rows where its own encoder's output
// would go: for Qwen3-VL / Qwen3.5 the merged rows with the deepstack rows after them
// (engine-rows.ts), [tokens, width x (1 + deepstack levels)].
//
// An item's identifier is its `uuid` when the request gives one (multi_modal_uuids), else vLLM's
// own hash of the item. tessera names each image by the SHA-256 of its file's bytes, lowercase
// hex (what `sha256sum` prints), so a client that sends that digest as the image's uuid finds the
// rows tessera wrote. The identifier names the image only: one storage folder per model and sizing.
import { TesseraError } from '../errors.js';
import type { EncodeResult } from '../tower.js';
import { engineRows } from './engine-rows.js';
import { safetensorsBytes } from '../formats/safetensors.js';
import { narrowTensor, type OutputDtype } from './out-dtype.js';

/** The file vLLM's connector reads inside an item's folder, and the tensor it takes from it. */
export const ENCODER_CACHE_FILE = 'encoder_cache.safetensors';
export const ENCODER_CACHE_TENSOR = 'ec_cache';

/** The identifier of an image: the SHA-256 of its bytes, lowercase hex. */
export function encoderCacheIdentifier(inputSha256: string | undefined, input: string): string {
  if (!inputSha256 || !/^[0-9a-f]{64}$/.test(inputSha256))
    throw new TesseraError('ERR_INTERNAL', `--format vllm-encoder-cache: ${input} was read without its SHA-256`);
  return inputSha256;
}

/** The safetensors file holding one image's encoder output under `ec_cache`. */
export function encoderCacheBytes(r: EncodeResult, metadata: Record<string, string>, dtype: OutputDtype = 'f32'): Buffer {
  const rows = engineRows(r);
  return safetensorsBytes([narrowTensor({ name: ENCODER_CACHE_TENSOR, dtype: 'F32', shape: [rows.rows, rows.cols], data: rows.data }, dtype)], metadata);
}
