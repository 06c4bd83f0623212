export { VisionTower } from './tower.js';
export type { OpenOptions, EncodeOptions, EncodeResult, PixelInput, Grid, Progress, TowerInfo } from './tower.js';
export { TesseraError, ERROR_CODES } from './errors.js';
export type { ErrorCode } from './errors.js';
export type { TowerSpec, StageSpec, TensorSpec, Family, DType } from './spec/types.js';
