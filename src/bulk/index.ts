// Bulk jobs (tessera encode over folders, --out-dir, and other workers that write the same
// outputs): inputs, the per-image writer and its formats, the manifest.
export { collectInputs, IMAGE_EXTENSIONS, type BulkInput, type CollectOptions } from './inputs.js';
export {
  OUTPUT_FORMATS,
  OUTPUT_LAYOUT_VERSION,
  checkDistinctOutputs,
  isUpToDate,
  upToDateRecord,
  outputJob,
  primaryOutput,
  recordPath,
  removeStaleTemporaries,
  stampInput,
  writeImageOutputs,
  type InputStamp,
  type OutputFormat,
  type OutputJob,
  type WrittenOutput,
} from './output-dir.js';
export { Manifest, MANIFEST_NAME, type ManifestEntry } from './manifest.js';
export { resultTensors, type OutputTensor } from './formats/tensors.js';
