// --format vllm: the chat-completions content part vLLM's OpenAI server accepts for an image's
// precomputed embeddings when started with --enable-mm-embeds (docs/downstream.md):
//   { "type": "image_embeds",
//     "image_embeds": { "image_embeds": <base64 .npy, f32 [tokens, cols]>,
//                       "image_grid_thw": <base64 .npy, int64 [1, 3]> } }
// vLLM loads base64 bytes that start with numpy's magic with np.load (vllm/multimodal/media/image.py).
// Qwen3-VL's rows carry the deepstack features after the merged ones (engine-rows.ts). vLLM's
// Gemma 4 model takes pixel values only (no image-embedding input), so Gemma 4 is refused here.
import { TesseraError } from '../errors.js';
import type { Family } from '../spec/types.js';
import type { EncodeResult } from '../tower.js';
import { engineRows } from './engine-rows.js';
import { npyBytes } from './npy.js';

/** Why a family cannot be written in this format, or undefined when it can. */
export function vllmUnsupported(family: Family): string | undefined {
  return family === 'gemma4'
    ? "vLLM's Gemma 4 model (vllm/model_executor/models/gemma4_mm.py) takes pixel values only, no precomputed image embeddings; use --format sglang or safetensors"
    : undefined;
}

export function toVllmContentPart(r: EncodeResult, family: Family): Record<string, unknown> {
  const why = vllmUnsupported(family);
  if (why) throw new TesseraError('ERR_INVALID_ARGUMENT', `--format vllm: ${why}`);
  if (!r.grid) throw new TesseraError('ERR_INTERNAL', '--format vllm: a Qwen result without its grid');
  const rows = engineRows(r);
  const embeds = npyBytes({ name: 'image_embeds', dtype: 'F32', shape: [rows.rows, rows.cols], data: rows.data });
  const grid = npyBytes({
    name: 'image_grid_thw',
    dtype: 'I64',
    shape: [r.grid.length, 3],
    data: BigInt64Array.from(r.grid.flatMap((g) => [g.t, g.h, g.w]), (v) => BigInt(v)),
  });
  return {
    type: 'image_embeds',
    image_embeds: { image_embeds: embeds.toString('base64'), image_grid_thw: grid.toString('base64') },
  };
}
