// tessera-vision/bulk: bulk jobs (tessera encode over folders, --out-dir, and the fleet's workers,
// which write the same outputs): inputs, the one job runner, the per-image writer and its formats,
// the manifest. A subpath of its own, so the main entry stays the tower's API.
export { collectInputs, IMAGE_EXTENSIONS, type BulkInput, type CollectOptions } from './inputs.js';
export {
  OUTPUT_DTYPES,
  OUTPUT_FORMATS,
  OUTPUT_LAYOUT_VERSION,
  checkDistinctOutputs,
  checkOutputs,
  findUpToDate,
  isUpToDate,
  upToDateRecord,
  outputJob,
  primaryOutput,
  recordPath,
  removeStaleTemporaries,
  stampInput,
  stampOfBytes,
  writeImageOutputs,
  type InputStamp,
  type OutputState,
  type UpToDateOutput,
  type OutputDtype,
  type OutputFormat,
  type OutputJob,
  type WrittenOutput,
} from './output-dir.js';
export {
  runBulk,
  loadFile,
  openOutputDir,
  manifestEntry,
  type BulkOutcome,
  type BulkRunOptions,
  type InputLoader,
  type LoadedInput,
} from './runner.js';
export { Manifest, MANIFEST_NAME, type ManifestEntry } from './manifest.js';
export { resultTensors, type OutputTensor } from '../outputs/tensors.js';
