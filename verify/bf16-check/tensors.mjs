// What the bf16 checks read from HF's side: whole safetensors files of F32 and I64 tensors (the
// suite's expected/ files and hf_towers.py's outputs), and a tower's input from one of them.
import { closeSync, openSync, readSync } from 'node:fs';
import { readSafetensorsHeader } from '../../dist/formats/safetensors.js';

/** Tensors a safetensors input/reference file holds, not stages: they make the tower's input. */
export const INPUT_TENSORS = new Set(['pixel_values', 'image_grid_thw', 'positions']);

/** Every tensor of the file: F32 as Float32Array, I64 as numbers. */
export async function readTensors(path) {
  const { tensors } = await readSafetensorsHeader(path);
  const fd = openSync(path, 'r');
  try {
    return Object.fromEntries(tensors.map((t) => {
      const buf = Buffer.alloc(t.length);
      readSync(fd, buf, 0, t.length, t.offset);
      const data = t.storedType === 'F32' ? new Float32Array(buf.buffer, buf.byteOffset, t.length / 4)
        : t.storedType === 'I64' ? Array.from(new BigInt64Array(buf.buffer, buf.byteOffset, t.length / 8), Number)
        : null;
      if (!data) throw new Error(`${path}: ${t.name} is ${t.storedType}, not F32 or I64`);
      return [t.name, data];
    }));
  } finally {
    closeSync(fd);
  }
}

/** encodePixels' input: Qwen's pixel_values and grid, or Gemma 4's unpadded pixel_values and (x, y) positions. */
export function towerInput(ref) {
  return ref.image_grid_thw
    ? { pixelValues: ref.pixel_values, grid: { t: ref.image_grid_thw[0], h: ref.image_grid_thw[1], w: ref.image_grid_thw[2] } }
    : { pixelValues: ref.pixel_values, positions: Int32Array.from(ref.positions) };
}

/** A stage of an encode result by HF's name (deepstack.K is the K-th deepstack output). */
export function stageOf(result, name) {
  return name.startsWith('deepstack.') ? result.deepstack?.[Number(name.split('.')[1])] : result.stages?.[name];
}

/** HF's stages in tower order: the blocks, then the outputs, then the deepstack outputs. */
export function stageOrder(a, b) {
  const key = (s) => (s.startsWith('block.') ? [0, Number(s.slice(6))] : s.startsWith('deepstack.') ? [2, Number(s.slice(10))] : [1, 0]);
  const [x, y] = [key(a), key(b)];
  return x[0] - y[0] || x[1] - y[1];
}

/** An error figure as the tables print it ('–' where there is none). */
export const e = (v) => (v === undefined ? '–' : v.toExponential(2));
