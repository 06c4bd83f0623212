// --format sglang: the multimodal item SGLang takes in place of an image (an `image_data` entry of
// its native /generate request, or of Engine.generate): precomputed embeddings, given as
//   { "format": "precomputed_embedding", "feature": [[...], ...] (f32 rows [tokens, cols]),
//     "image_grid_thw": [[t, h, w], ...] (Qwen only, one row per image) }
// (python/sglang/srt/multimodal/processors/base_processor.py; docs/downstream.md). Qwen3-VL's rows
// carry the deepstack features after the merged ones, as SGLang's encoder returns them and its
// separate_deepstack_embeds splits them. Each number is the shortest decimal that reads back to
// the same f32 (f32-json.ts); with an output dtype, of the value rounded to it (out-dtype.ts), which
// SGLang's cast to the model's dtype then gives back exactly.
//
// SGLang takes one precomputed item per modality and request (_validate_one_modality): a request
// about several pages sends ONE item whose rows are the pages' rows one after another and whose
// image_grid_thw lists each page's grid, in the order of the pages' placeholders in the prompt.
// toSglangItemJson builds that item from several results.
import { TesseraError } from '../errors.js';
import type { EncodeResult } from '../tower.js';
import { engineRows } from './engine-rows.js';
import { f32RowJson } from './f32-json.js';
import { roundedF32, type OutputDtype } from './out-dtype.js';

/**
 * The item as JSON text, built row by row (the rows are most of it): one image's, or one item
 * for several images (pages) of one request, their rows concatenated and their grids listed.
 */
export function toSglangItemJson(results: EncodeResult | readonly EncodeResult[], options: { outputDtype?: OutputDtype } = {}): string {
  const list = Array.isArray(results) ? (results as readonly EncodeResult[]) : [results as EncodeResult];
  if (list.length === 0) throw new TesseraError('ERR_INVALID_ARGUMENT', 'an SGLang item needs at least one result');
  const parts: string[] = ['{"format":"precomputed_embedding","feature":['];
  let cols: number | undefined;
  let first = true;
  for (const [i, r] of list.entries()) {
    const rows = engineRows(r);
    if (cols !== undefined && rows.cols !== cols)
      throw new TesseraError('ERR_INVALID_ARGUMENT', `result ${i} has rows of ${rows.cols} values, result 0 of ${cols}: one SGLang item takes one tower's rows`);
    if (Boolean(r.grid) !== Boolean(list[0]!.grid))
      throw new TesseraError('ERR_INVALID_ARGUMENT', `result ${i} ${r.grid ? 'has' : 'has no'} grid, unlike result 0: one SGLang item takes one tower's rows`);
    cols = rows.cols;
    const data = roundedF32(rows.data, options.outputDtype ?? 'f32');
    for (let t = 0; t < rows.rows; t++) {
      parts.push(first ? '' : ',', f32RowJson(data.subarray(t * rows.cols, (t + 1) * rows.cols)));
      first = false;
    }
  }
  parts.push(']');
  if (list[0]!.grid) parts.push(',"image_grid_thw":', JSON.stringify(list.flatMap((r) => r.grid!.map((g) => [g.t, g.h, g.w]))));
  parts.push('}');
  return parts.join('');
}
