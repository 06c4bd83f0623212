// Target sizes, in IEEE doubles and exactly HF's operation order (JS numbers are doubles, and V8
// never contracts to FMA). Qwen: docs/models/qwen-vision.md#sizing; Gemma 4: docs/models/gemma4-vision.md#sizing.
import { TesseraError } from '../errors.js';
import { GEMMA_SOFT_TOKEN_BUDGETS } from './config.js';

/** Qwen refuses images whose longer side exceeds this many times the shorter (exactly 200 passes). */
export const QWEN_MAX_ASPECT = 200;

/** Python's round(): half to even. (Math.round rounds half up: 94.5 -> 95, Python gives 94.) */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f; // exact for doubles
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

export interface Size {
  height: number;
  width: number;
}

/** HF's aspect test: max/min in doubles, refused when > 200. */
export function qwenAspectOk(height: number, width: number): boolean {
  return !(Math.max(height, width) / Math.min(height, width) > QWEN_MAX_ASPECT);
}

/**
 * Qwen2-VL smart_resize: sides rounded (half to even) to multiples of `factor`, then scaled into
 * [minPixels, maxPixels] by area; the branch results are not re-checked against the other bound.
 */
export function smartResize(height: number, width: number, factor = 32, minPixels = 65536, maxPixels = 16777216): Size {
  if (!(height > 0 && width > 0)) throw new TesseraError('ERR_INVALID_ARGUMENT', `image size ${width}x${height} is empty`);
  if (!qwenAspectOk(height, width)) {
    throw new TesseraError(
      'ERR_IMAGE_ASPECT',
      `image ${width}x${height}: aspect ratio ${(Math.max(height, width) / Math.min(height, width)).toFixed(2)} exceeds ${QWEN_MAX_ASPECT}`,
    );
  }
  let h = roundHalfEven(height / factor) * factor;
  let w = roundHalfEven(width / factor) * factor;
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return { height: h, width: w };
}

/** Checks a soft-token budget (an option or a config value). */
export function checkSoftTokenBudget(s: number, what = 'maxSoftTokens'): number {
  if (!(GEMMA_SOFT_TOKEN_BUDGETS as readonly number[]).includes(s)) {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `${what} ${s} is not one of ${GEMMA_SOFT_TOKEN_BUDGETS.join(', ')}`);
  }
  return s;
}

/**
 * Gemma 4: the largest multiples of pool*patch (48) that keep the image's aspect within a budget
 * of maxSoftTokens*pool² patches, up- or down-scaling; thin images get one 48-px row or column.
 */
export function gemmaTargetSize(height: number, width: number, maxSoftTokens = 280, patchSize = 16, poolingKernelSize = 3): Size {
  if (!(height > 0 && width > 0)) throw new TesseraError('ERR_INVALID_ARGUMENT', `image size ${width}x${height} is empty`);
  const k = poolingKernelSize;
  const budget = maxSoftTokens * k * k * patchSize * patchSize;
  const f = Math.sqrt(budget / (height * width));
  const m = k * patchSize;
  let th = Math.floor((f * height) / m) * m;
  let tw = Math.floor((f * width) / m) * m;
  const maxSide = maxSoftTokens * m;
  if (th === 0 && tw === 0) {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `image ${width}x${height} cannot be sized into ${maxSoftTokens} soft tokens`);
  }
  if (th === 0) {
    th = m;
    tw = Math.min(Math.floor(width / height) * m, maxSide);
  } else if (tw === 0) {
    tw = m;
    th = Math.min(Math.floor(height / width) * m, maxSide);
  }
  if (th * tw > budget) {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `image ${width}x${height}: ${th}x${tw} exceeds the ${maxSoftTokens}-token budget`);
  }
  return { height: th, width: tw };
}
