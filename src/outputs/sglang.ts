// --format sglang: the multimodal item SGLang takes in place of an image (an `image_data` entry of
// its native /generate request, or of Engine.generate): precomputed embeddings, given as
//   { "format": "precomputed_embedding", "feature": [[...], ...] (f32 rows [tokens, cols]),
//     "image_grid_thw": [[t, h, w]] (Qwen only) }
// (python/sglang/srt/multimodal/processors/base_processor.py; docs/downstream.md). Qwen3-VL's rows
// carry the deepstack features after the merged ones, as SGLang's encoder returns them and its
// separate_deepstack_embeds splits them. JSON numbers hold f32 values exactly (each prints as the
// shortest decimal that reads back as the same double, hence the same f32).
import type { EncodeResult } from '../tower.js';
import { engineRows } from './engine-rows.js';

/** The item as JSON text, built row by row (the rows are most of it). */
export function toSglangItemJson(r: EncodeResult): string {
  const rows = engineRows(r);
  const parts: string[] = ['{"format":"precomputed_embedding","feature":['];
  for (let t = 0; t < rows.rows; t++) {
    if (t) parts.push(',');
    parts.push('[', Array.prototype.join.call(rows.data.subarray(t * rows.cols, (t + 1) * rows.cols), ','), ']');
  }
  parts.push(']');
  if (r.grid) parts.push(',"image_grid_thw":', JSON.stringify(r.grid.map((g) => [g.t, g.h, g.w])));
  parts.push('}');
  return parts.join('');
}
