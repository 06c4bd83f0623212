export { VisionTower } from './tower.js';
export type { OpenOptions, EncodeOptions, EncodeResult, Estimate, PixelInput, Grid, Progress } from './tower.js';
export type { TowerInfo, MemoryInfo } from './tower-info.js';
export { TesseraError, ERROR_CODES } from './errors.js';
export type { ErrorCode } from './errors.js';
export { runDoctor, HF_TOLERANCE } from './doctor.js';
export type { DoctorReport, DoctorOptions, DoctorRun, DoctorStage, DoctorTower, DoctorGpu } from './doctor.js';
export type { TowerSpec, StageSpec, TensorSpec, Family, DType } from './spec/types.js';
export type { EncodeManyItem, EncodeManyOptions } from './tower.js';
// Bulk outputs: the per-image writer `tessera encode --out-dir` uses, and the engines' payloads (docs/downstream.md).
export { toVllmContentPart } from './outputs/vllm.js';
export { toSglangItemJson } from './outputs/sglang.js';
export {
  collectInputs,
  outputJob,
  stampInput,
  isUpToDate,
  upToDateRecord,
  writeImageOutputs,
  checkDistinctOutputs,
  removeStaleTemporaries,
  primaryOutput,
  recordPath,
  Manifest,
  OUTPUT_FORMATS,
  type BulkInput,
  type OutputJob,
  type OutputFormat,
  type InputStamp,
  type WrittenOutput,
  type ManifestEntry,
} from './bulk/index.js';
