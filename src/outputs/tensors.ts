// The tensors one image's result is written as, by every output format (--out, --out-dir
// safetensors, npy): their names, shapes and dtypes are defined here and only here
// (README, "Output files").
// Float tensors are F32, or BF16 / F16 with an output dtype (out-dtype.ts).
//   embeddings   [tokens, width] F32   the tower's output (Qwen: the merger; Gemma 4: the projection)
//   grid_thw     [1, 3] I64            Qwen: the patch grid (t, h, w), as HF's image_grid_thw
//   positions    [patches, 2] I64      Gemma 4: (x, y) of each patch row
//   deepstack.K  [tokens, width] F32   Qwen3-VL: the K-th deepstack merger's output
//   stage.NAME   [rows, cols] F32      with --stages: every stage (embed, block.N, merged, ...)
import type { OutputDtype } from '../options.js';
import type { EncodeResult } from '../tower.js';
import { narrowTensor } from './out-dtype.js';

export interface OutputTensor {
  name: string;
  /** BF16 and F16 data are the values' bits (Uint16Array). */
  dtype: 'F32' | 'BF16' | 'F16' | 'I64';
  shape: number[];
  data: Float32Array | Uint16Array | BigInt64Array;
}

function patchesOf(r: EncodeResult): number {
  if (r.grid) return r.grid.reduce((a, g) => a + g.t * g.h * g.w, 0);
  return (r.positions?.length ?? 0) / 2;
}

const f32 = (name: string, shape: number[], data: Float32Array): OutputTensor => ({ name, dtype: 'F32', shape, data });
const i64 = (name: string, shape: number[], values: ArrayLike<number>): OutputTensor => ({
  name,
  dtype: 'I64',
  shape,
  data: BigInt64Array.from(Array.from(values), (v) => BigInt(v)),
});

/** The tensors of one result, in file order, the float ones in `dtype` (default f32). */
export function resultTensors(r: EncodeResult, dtype: OutputDtype = 'f32'): OutputTensor[] {
  return f32ResultTensors(r).map((t) => narrowTensor(t, dtype));
}

function f32ResultTensors(r: EncodeResult): OutputTensor[] {
  const out: OutputTensor[] = [f32('embeddings', [r.tokens, r.width], r.embeddings)];
  if (r.grid) out.push(i64('grid_thw', [r.grid.length, 3], r.grid.flatMap((g) => [g.t, g.h, g.w])));
  if (r.positions) out.push(i64('positions', [r.positions.length / 2, 2], r.positions));
  for (const [k, d] of (r.deepstack ?? []).entries()) out.push(f32(`deepstack.${k}`, [r.tokens, d.length / r.tokens], d));
  // Each stage's shape as the addon reports it (a row per patch or per token).
  for (const [name, d] of Object.entries(r.stages ?? {})) {
    const shape = r.stageShapes?.[name];
    out.push(f32(`stage.${name}`, shape ? [shape.rows, shape.cols] : [d.length], d));
  }
  return out;
}

/** Patch rows of a result (for the per-image share of a group's encode time, and the CLI's rows). */
export { patchesOf };
