// Block-major batches (docs/design.md#batches): several preprocessed images become one tower input (their
// rows concatenated, one grid or position block each), and the tower's output is cut back into
// per-image results. Pure functions: the orchestration lives in VisionTower.encodeBatch.
import type { NativeEncodeArgs, NativeEncodeResult, NativeStage, StageRowKind } from './native.js';
import type { Prepared } from './prepare.js';

/** A stage output's shape, as the addon reports it: [rows, cols], a row per patch or per token. */
export interface StageShape {
  kind: StageRowKind;
  rows: number;
  cols: number;
}

export interface ImageResult {
  embeddings: Float32Array;
  tokens: number;
  width: number;
  deepstack?: Float32Array[];
  stages?: Record<string, Float32Array>;
  stageShapes?: Record<string, StageShape>;
}

/** The `stages` and `stageShapes` of a result from the addon's stage list. */
export function stageRecords(stages: readonly NativeStage[]): Pick<ImageResult, 'stages' | 'stageShapes'> {
  return {
    stages: Object.fromEntries(stages.map((s) => [s.name, s.data])),
    stageShapes: Object.fromEntries(stages.map((s) => [s.name, { kind: s.kind, rows: s.rows, cols: s.cols }])),
  };
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
 * Cuts a group's output back per image by each stage's row kind (the addon's): stages with a row
 * per patch (embed, block.N) by patches, the others (merged, deepstack, pooled, projected) and
 * the embeddings by tokens. Every image's rows are contiguous in both, in input order.
 */
export function splitResult(raw: NativeEncodeResult, items: readonly Prepared[], withStages: boolean): ImageResult[] {
  let patchRow = 0;
  let tokenRow = 0;
  return items.map((p) => {
    const rows = (kind: StageRowKind): [number, number] => (kind === 'patch' ? [patchRow, p.patches] : [tokenRow, p.tokens]);
    const cut = (data: Float32Array, kind: StageRowKind, cols: number) => {
      if (items.length === 1) return data;
      const [start, n] = rows(kind);
      return data.slice(start * cols, (start + n) * cols);
    };
    const r: ImageResult = { embeddings: cut(raw.embeddings, 'token', raw.width), tokens: p.tokens, width: raw.width };
    if (raw.deepstack.length) r.deepstack = raw.deepstack.map((d) => cut(d, 'token', raw.width));
    if (withStages)
      Object.assign(r, stageRecords(raw.stages.map((s) => ({ ...s, rows: rows(s.kind)[1], data: cut(s.data, s.kind, s.cols) }))));
    patchRow += p.patches;
    tokenRow += p.tokens;
    return r;
  });
}
