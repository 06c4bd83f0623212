export { VisionTower } from './tower.js';
export type { OpenOptions, EncodeOptions, EncodeResult, Estimate, PixelInput, Grid, Progress } from './tower.js';
export type { TowerInfo, MemoryInfo } from './tower-info.js';
export { TesseraError, ERROR_CODES } from './errors.js';
export type { ErrorCode } from './errors.js';
export type { TowerSpec, StageSpec, TensorSpec, Family, DType } from './spec/types.js';
