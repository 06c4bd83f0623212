// Random-weight towers written as HF checkpoint folders: the CLI's demo tower and the benchmarks'
// real-size towers (scripts/make-synthetic-*.mjs) are all filled here (a family's folder writer says
// which tensors and configs). Weights are deterministic
// (xorshift32) and scaled so activations stay in a sane range: matrices ~ U(-a, a) with
// a = sqrt(3 / fan_in), biases ±0.02, norm weights 1, position tables ±0.5. Never real models.
import { closeSync, openSync, writeSync } from 'node:fs';

export type WeightKind = 'w' | 'b' | 'one' | 'e';

export interface SyntheticTensor {
  name: string;
  shape: number[];
  kind: WeightKind;
}

function fill(buf: Buffer, kind: WeightKind, fanIn: number, seed: number): void {
  let s = seed >>> 0 || 1;
  const scale = kind === 'w' ? Math.sqrt(3 / fanIn) : kind === 'e' ? 0.5 : 0.02;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < buf.length / 2; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    f32[0] = kind === 'one' ? 1 : ((s / 4294967296) * 2 - 1) * scale;
    buf.writeUInt16LE(u32[0]! >>> 16, i * 2);
  }
}

/** Writes the tensors as one bf16 safetensors file, a tensor at a time (memory: the largest one). */
export function writeRandomBf16(path: string, tensors: readonly SyntheticTensor[], seed = 1): void {
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', note: 'tessera synthetic tower: RANDOM weights' } };
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * 2;
    header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const fd = openSync(path, 'w');
  try {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(text.length));
    writeSync(fd, len);
    writeSync(fd, Buffer.from(text, 'latin1'));
    tensors.forEach((t, i) => {
      const buf = Buffer.alloc(t.shape.reduce((a, b) => a * b, 1) * 2);
      fill(buf, t.kind, t.shape.length > 1 ? t.shape.slice(1).reduce((a, b) => a * b, 1) : 1, seed * 7919 + i);
      writeSync(fd, buf);
    });
  } finally {
    closeSync(fd);
  }
}

// The folder writers live with their families; the CLI's demo and the benchmark scripts take them from here.
export { QWEN3_5_LARGE, qwenVisionTensors, writeQwenFolder, type QwenVisionSize } from './families/qwen3/synthetic.js';
export { QWEN2_5_VL_7B, qwen25VisionTensors, writeQwen25Folder, type Qwen25VisionSize } from './families/qwen2/synthetic.js';
