// Block-major batches (docs/design.md#batches): several preprocessed images become one tower input (their
// rows concatenated, one grid or position block each), and the tower's output is cut back into
// per-image results. Pure functions: the orchestration lives in VisionTower.encodeBatch.
import type { NativeEncodeArgs, NativeEncodeResult } from './native.js';
import type { Prepared } from './prepare.js';

export interface ImageResult {
  embeddings: Float32Array;
  tokens: number;
  width: number;
  deepstack?: Float32Array[];
  stages?: Record<string, Float32Array>;
}

/** One tower input for a group of images, in order. */
export function concatPrepared(items: readonly Prepared[], cols: number): NativeEncodeArgs {
  const pixels = new Float32Array(items.reduce((a, p) => a + p.pixelValues.length, 0));
  let off = 0;
  for (const p of items) pixels.set(p.pixelValues, off), (off += p.pixelValues.length);
  if (items[0]?.positions === undefined)
    return { pixels, cols, grids: Int32Array.from(items.flatMap((p) => [p.grid!.t, p.grid!.h, p.grid!.w])) };
  const positions = new Int32Array(items.reduce((a, p) => a + p.positions!.length, 0));
  off = 0;
  for (const p of items) positions.set(p.positions!, off), (off += p.positions!.length);
  return { pixels, cols, positions, imageRows: items.map((p) => p.patches) };
}

/**
 * Cuts a group's output back per image. Stages with one row per patch (embed, block.N) are cut by
 * patches, the others (merged, deepstack, pooled, projected) by tokens: every image's rows are
 * contiguous in both, in input order.
 */
export function splitResult(raw: NativeEncodeResult, items: readonly Prepared[], withStages: boolean): ImageResult[] {
  const totalPatches = items.reduce((a, p) => a + p.patches, 0);
  let patchRow = 0;
  let tokenRow = 0;
  return items.map((p) => {
    const cut = (data: Float32Array, rows: number, cols: number) => {
      if (items.length === 1) return data;
      const [start, n] = rows === totalPatches && rows !== raw.tokens ? [patchRow, p.patches] : [tokenRow, p.tokens];
      return data.slice(start * cols, (start + n) * cols);
    };
    const r: ImageResult = { embeddings: cut(raw.embeddings, raw.tokens, raw.width), tokens: p.tokens, width: raw.width };
    if (raw.deepstack.length) r.deepstack = raw.deepstack.map((d) => cut(d, raw.tokens, raw.width));
    if (withStages) r.stages = Object.fromEntries(raw.stages.map((s) => [s.name, cut(s.data, s.rows, s.cols)]));
    patchRow += p.patches;
    tokenRow += p.tokens;
    return r;
  });
}
