// Image preprocessing: decode + admission, sizing, and the PIL-exact pipeline of both families.
export {
  GEMMA_SOFT_TOKEN_BUDGETS,
  QWEN_HUB_PREPROCESSOR_CONFIG,
  RESCALE_1_255,
  parseGemmaPreprocessConfig,
  parseQwenPreprocessConfig,
  type GemmaPreprocessConfig,
  type QwenPreprocessConfig,
} from './config.js';
export { DEFAULT_MAX_INPUT_PIXELS, decodeImage, disableDecodeCache, readImageHeader, type AdmissionOptions, type DecodedImage, type ImageHeader, type ImageInput, type PixelFormat } from './decode.js';
export { resizeRgb8 } from './native.js';
export {
  decodeRgb8,
  planGemma,
  planQwen,
  preprocessGemma,
  preprocessGemmaBytes,
  preprocessQwen,
  preprocessQwenBytes,
  type GemmaPlan,
  type GemmaPreprocessOptions,
  type GemmaPreprocessResult,
  type PreprocessTimings,
  type QwenPlan,
  type QwenPreprocessOptions,
  type QwenPreprocessResult,
  type WidthHeight,
} from './preprocess.js';
export { QWEN_MAX_ASPECT, checkSoftTokenBudget, gemmaTargetSize, qwenAspectOk, roundHalfEven, smartResize, type Size } from './sizing.js';
