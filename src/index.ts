export { VisionTower } from './tower.js';
export type {
  OpenOptions,
  PreprocessOptions,
  EncodeOptions,
  EncodeResult,
  Estimate,
  PixelInput,
  QwenPixelInput,
  GemmaPixelInput,
  Grid,
  GridTriple,
  Progress,
} from './tower.js';
export type { Backend, Residency, Precision, OutputDtype } from './options.js';
export type { GemmaSoftTokenBudget } from './image/config.js';
export type { TowerInfo, MemoryInfo } from './tower-info.js';
export { TesseraError, ERROR_CODES } from './errors.js';
export type { ErrorCode } from './errors.js';
export { runDoctor, HF_TOLERANCE } from './doctor.js';
export type { DoctorReport, DoctorOptions, DoctorRun, DoctorStage, DoctorTower, DoctorGpu } from './doctor.js';
export type { TowerSpec, StageSpec, TensorSpec, Family, DType } from './spec/types.js';
export type { EncodeManyItem, EncodeManyOptions } from './tower.js';
// The engines' payloads (docs/downstream.md). The bulk jobs' parts (inputs, the runner, the per-image
// writer, the manifest) are the subpath tessera-vision/bulk.
export { toVllmContentPart } from './outputs/vllm.js';
export { toSglangItemJson } from './outputs/sglang.js';
