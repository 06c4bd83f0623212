// The embedding rows an inference engine takes in place of an image: for Qwen3-VL, vLLM's and
// SGLang's own vision encoders return the merger output with every deepstack merger's output
// concatenated after it on the last dimension, [tokens, width x (1 + deepstack levels)], and
// split it back before the language model (docs/downstream.md cites the source). Qwen3.5 has no
// deepstack, Gemma 4 neither: their rows are the embeddings as they are.
import type { EncodeResult } from '../tower.js';

export function engineRows(r: EncodeResult): { rows: number; cols: number; data: Float32Array } {
  const parts = [r.embeddings, ...(r.deepstack ?? [])];
  if (parts.length === 1) return { rows: r.tokens, cols: r.width, data: r.embeddings };
  const cols = r.width * parts.length;
  const data = new Float32Array(r.tokens * cols);
  for (let t = 0; t < r.tokens; t++)
    parts.forEach((p, k) => data.set(p.subarray(t * r.width, (t + 1) * r.width), t * cols + k * r.width));
  return { rows: r.tokens, cols, data };
}
