// The tensors one image's result is written as, by every output format (--out, --out-dir
// safetensors, npy): their names, shapes and dtypes are defined here and only here
// (README, "Output files").
//   embeddings   [tokens, width] F32   the tower's output (Qwen: the merger; Gemma 4: the projection)
//   grid_thw     [1, 3] I64            Qwen: the patch grid (t, h, w), as HF's image_grid_thw
//   positions    [patches, 2] I64      Gemma 4: (x, y) of each patch row
//   deepstack.K  [tokens, width] F32   Qwen3-VL: the K-th deepstack merger's output
//   stage.NAME   [rows, cols] F32      with --stages: every stage (embed, block.N, merged, ...)
import type { EncodeResult } from '../tower.js';

export interface OutputTensor {
  name: string;
  dtype: 'F32' | 'I64';
  shape: number[];
  data: Float32Array | BigInt64Array;
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

/** The tensors of one result, in file order. */
export function resultTensors(r: EncodeResult): OutputTensor[] {
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
