// --format vllm / vllm-torch: the chat-completions content part vLLM's OpenAI server accepts for an
// image's precomputed embeddings when started with --enable-mm-embeds (docs/downstream.md):
//   { "type": "image_embeds",
//     "image_embeds": { "image_embeds": <base64 tensor, f32 (or the output dtype) [tokens, cols]>,
//                       "image_grid_thw": <base64 tensor, int64 [3]> } }
// One part per image; vLLM's chat-content merge (_merge_embeds in vllm/entrypoints/chat_utils.py)
// stacks the parts' grids into [images, 3] and concatenates their rows, which is what
// Qwen2_5_VLImageEmbeddingInputs' shape check takes (image_grid_thw ("ni", 3)). A grid of [1, 3]
// per part would stack into [images, 1, 3] and fail it.
// The tensors are base64 of either .npy bytes (vLLM 0.19 and later recognise numpy's magic and
// np.load them) or torch.save bytes (what vLLM's own tensor2base64 writes; every release reads it).
// Qwen3-VL's rows carry the deepstack features after the merged ones (engine-rows.ts). A family whose
// vLLM model takes pixel values only (no image-embedding input) says so in its registry entry
// (outputs.vllmRefusal), and is refused here.
import { TesseraError } from '../errors.js';
import { familyOf } from '../families/registry.js';
import type { Family } from '../spec/types.js';
import type { EncodeResult } from '../tower.js';
import { engineRows } from './engine-rows.js';
import { npyBytes } from './npy.js';
import { narrowTensor, type OutputDtype } from './out-dtype.js';
import type { OutputTensor } from './tensors.js';
import { torchSaveBytes } from './torch-save.js';

/** How the tensors of a content part are serialised: numpy's .npy (vLLM >= 0.19) or torch.save (any vLLM). */
export type VllmTensorEncoding = 'npy' | 'torch';

const ENCODERS: Record<VllmTensorEncoding, (t: OutputTensor) => Buffer> = { npy: npyBytes, torch: torchSaveBytes };

/** Why a family cannot be written in this format, or undefined when it can. */
export function vllmUnsupported(family: Family): string | undefined {
  return familyOf(family).outputs.vllmRefusal;
}

/** The grid of one image as vLLM takes it per content part: int64 of shape (3,). */
export function vllmGridTensor(r: EncodeResult): OutputTensor {
  if (!r.grid || r.grid.length !== 1) throw new TesseraError('ERR_INTERNAL', `--format vllm: a Qwen result has ${r.grid?.length ?? 0} grids, not 1`);
  const g = r.grid[0]!;
  return { name: 'image_grid_thw', dtype: 'I64', shape: [3], data: BigInt64Array.of(BigInt(g.t), BigInt(g.h), BigInt(g.w)) };
}

export function toVllmContentPart(r: EncodeResult, family: Family, options: { encoding?: VllmTensorEncoding; outputDtype?: OutputDtype } = {}): Record<string, unknown> {
  const why = vllmUnsupported(family);
  if (why) throw new TesseraError('ERR_INVALID_ARGUMENT', `--format vllm: ${why}`);
  const encode = ENCODERS[options.encoding ?? 'npy'];
  if (!encode) throw new TesseraError('ERR_INVALID_ARGUMENT', `vLLM tensor encoding must be npy or torch (got '${String(options.encoding)}')`);
  const grid = vllmGridTensor(r);
  const rows = engineRows(r);
  const embeds = encode(narrowTensor({ name: 'image_embeds', dtype: 'F32', shape: [rows.rows, rows.cols], data: rows.data }, options.outputDtype ?? 'f32'));
  return {
    type: 'image_embeds',
    image_embeds: { image_embeds: embeds.toString('base64'), image_grid_thw: encode(grid).toString('base64') },
  };
}
