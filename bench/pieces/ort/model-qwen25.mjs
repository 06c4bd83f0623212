// The Qwen2.5-VL blocks both engines run in the side-by-side bench (bench/pieces/qwen25-peer.mjs): a
// synthetic Qwen2.5-VL-7B-shaped tower of 2 blocks (hidden 1280, 16 heads of 80, gated SiLU MLP 3420 with
// biases, RMSNorm; block 0 attends within windows of 8x8 patches, block 1 over the whole image, as blocks
// 7/15/23/31 of the real tower do) written as an HF folder with bf16 weights for tessera, and each block,
// with the same weights widened to f32, as its own ONNX model for onnxruntime.
//
// The window attention is written as an ONNX export of HF's code has it: HF permutes the rows into
// window order once, before the blocks (`get_window_index`), and its attention (transformers 5.x, eager
// and sdpa) splits q, k and v at the window boundaries and attends within each piece. Exported at a
// fixed grid whose windows are all whole (8x8 patches: 1,024 = 32x32 and 4,096 = 64x64 patches), those
// pieces are equal, and the split becomes a Reshape to [windows, 64 tokens, heads, dim]: one batched
// attention instead of a subgraph per window. So the ONNX models take their rows (and rope tables) in
// window order and attend in two variants, as bench/pieces/ort/model.mjs does for Qwen3.5:
//   std: Reshape/Transpose/MatMul/Softmax/MatMul over [windows, heads, 64, 80] (a batched MatMul;
//        [windows, 16, 64, 64] scores), rope from elementwise ops;
//   mha: com.microsoft RotaryEmbedding + MultiHeadAttention with the windows as its batch (ORT's fused
//        kernels).
// The full-attention block is the same graph with one batch of all rows. (transformers 4.x's eager path
// instead masked a whole-image [N, N] score matrix with an additive block-diagonal mask: N / 64 times
// the attention work of the windows, not what a fair peer runs.) RMSNorm is opset 23's
// RMSNormalization, the gated MLP gate·sigmoid(gate)·up as torch exports SiLU.
//   node bench/pieces/ort/model-qwen25.mjs      (writes bench/out/qwen25-peer-v1/, prints the paths)
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeSyntheticQwen25 } from '../../make-synthetic-qwen25.mjs';
import { graphBuilder, readTensorsF32, ropeTables, transpose } from './model.mjs';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('../../..', import.meta.url));

/** The Qwen2.5-VL-7B tower's block (the real checkpoints'), and the blocks of the bench's 2-block stack. */
export const Q25 = { hidden: 1280, heads: 16, headDim: 80, mlp: 3420, eps: 1e-6, windowPatches: 8, merge: 2 };
export const Q25_TOWER = { depth: 32, full: [7, 15, 23, 31] };
export const STACK = { depth: 2, full: [1] }; // block 0: windows; block 1: the whole image
const VERSION = 'v1'; // bump when the generated graphs change, so that stale files are not reused
export const OUT_DIR = join(root, 'bench', 'out', `qwen25-peer-${VERSION}`);

/** FLOPs of one block at N patches (one image) whose attention segments are `seg` rows long. */
export const blockFlops25 = (N, seg, d = Q25) =>
  2 * N * (d.hidden * 3 * d.hidden + d.hidden * d.hidden + 3 * d.hidden * d.mlp) + 4 * N * seg * d.hidden;

/**
 * The processor row of each row in window order, for one image of grid h x w patches (HF's
 * `get_window_index`; docs/models/qwen2-vision.md#window-attention): windows in raster order, each
 * window's merged tokens in raster order, a merged token's `merge`² patches together. Returns { rows,
 * windows: [first row, rows] per window }; edge windows are smaller where the grid is not whole windows.
 */
export function windowOrder({ h, w }, d = Q25) {
  const m = d.merge, side = d.windowPatches / m, th = h / m, tw = w / m, rows = [], windows = [];
  for (let wr = 0; wr < th; wr += side)
    for (let wc = 0; wc < tw; wc += side) {
      const first = rows.length;
      for (let r = wr; r < Math.min(wr + side, th); r++)
        for (let c = wc; c < Math.min(wc + side, tw); c++) for (let k = 0; k < m * m; k++) rows.push((r * tw + c) * m * m + k);
      windows.push([first, rows.length - first]);
    }
  return { rows, windows };
}

/** The rows of a [N, width] matrix taken in `order` (out[i] = a[order[i]]), or put back (out[order[i]] = a[i]). */
export function permuteRows(a, order, width, back = false) {
  const out = new Float32Array(a.length);
  for (let i = 0; i < order.length; i++) {
    const [to, from] = back ? [order[i], i] : [i, order[i]];
    out.set(a.subarray(from * width, (from + 1) * width), to * width);
  }
  return out;
}

/**
 * What ORT is fed for one image: the rope tables [N, headDim / 2] and the row order (window order), and
 * the tokens per window of the equal windows the batched graph needs (a grid of whole windows).
 */
export function ortInputs(grid, d = Q25) {
  const { rows, windows } = windowOrder(grid, d);
  const seg = windows[0][1];
  if (windows.some(([, n]) => n !== seg))
    throw new Error(`grid ${grid.h}x${grid.w} is not whole windows of ${d.windowPatches}x${d.windowPatches} patches: the batched window graph needs equal windows`);
  const t = ropeTables(grid, d.merge, d.headDim);
  const half = d.headDim / 2;
  return { order: rows, seg, cos: permuteRows(t.cos, rows, half), sin: permuteRows(t.sin, rows, half) };
}

// ---- ONNX graph of one block ------------------------------------------------------------------
/**
 * One Qwen2.5-VL block as an ONNX model: inputs x [N, D], cos / sin [N, headDim/2] (rows in window order),
 * pos [1, N] (mha: each row's index into the tables); output y [N, D]. `seg` = tokens per window, 0 for a
 * full-attention block. `w(name)` gives the f32 tensor of `blocks.L.<name>` ({ data }).
 */
export function buildBlockOnnx(onnx, w, attn, seg, d = Q25) {
  const { T, nodes, node, f32, i64, vi, model } = graphBuilder(onnx);
  const D = d.hidden, H = d.heads, hd = d.headDim;
  const [B, S] = seg ? [-1, seg] : [1, -1]; // attention batch (windows) and rows per batch
  const lin = (n, rows, cols) => f32(`${n}.wT`, [cols, rows], transpose(w(`${n}.weight`).data, rows, cols));
  const vec = (n) => f32(n, [w(n).data.length], w(n).data);
  const affine = (x, n, rows, cols) => node('Add', [node('MatMul', [x, lin(n, rows, cols)]), vec(`${n}.bias`)]);
  const rms = (x, n) => node('RMSNormalization', [x, vec(n)], 1, { axis: -1, epsilon: { float: d.eps } });
  const shFlat = i64('shape_flat', [-1, D]);

  const x = 'x';
  const qkv = affine(rms(x, 'norm1.weight'), 'attn.qkv', 3 * D, D); // [N, 3D]
  let o; // [N, D]
  if (attn === 'std') {
    const shRope = i64('shape_rope', [-1, 1, 1, hd]);
    const cos4 = node('Reshape', [node('Concat', ['cos', 'cos'], 1, { axis: 1 }), shRope]);
    const sin4 = node('Reshape', [node('Concat', ['sin', 'sin'], 1, { axis: 1 }), shRope]);
    const scale = f32('attn_scale', [], Float32Array.of(1 / Math.sqrt(hd)));
    const [qk, v] = node('Split', [node('Reshape', [qkv, i64('shape_heads', [-1, 3, H, hd])]), i64('split_2_1', [2, 1])], 2, { axis: 1 }); // [N,2,H,hd], [N,1,H,hd]
    const [lo, hi] = node('Split', [qk, i64('split_half', [hd / 2, hd / 2])], 2, { axis: -1 });
    const qkr = node('Add', [node('Mul', [qk, cos4]), node('Mul', [node('Concat', [node('Neg', [hi]), lo], 1, { axis: -1 }), sin4])]);
    // [N, c, H, hd] -> [c, B, H, S, hd]: the windows are the batch
    const batched = (t, c) => node('Transpose', [node('Reshape', [t, i64(`shape_win${c}`, [B, S, c, H, hd])])], 1, { perm: [2, 0, 3, 1, 4] });
    const [q, k] = node('Split', [batched(qkr, 2)], 2, { axis: 0, num_outputs: 2 }); // [1,B,H,S,hd]
    const s = node('MatMul', [node('Mul', [q, scale]), node('Transpose', [k], 1, { perm: [0, 1, 2, 4, 3] })]); // [1,B,H,S,S]
    const ov = node('MatMul', [node('Softmax', [s], 1, { axis: -1 }), batched(v, 1)]); // [1,B,H,S,hd]
    o = node('Reshape', [node('Transpose', [ov], 1, { perm: [0, 1, 3, 2, 4] }), shFlat]);
  } else if (attn === 'mha') {
    const [q, k, v] = node('Split', [node('Reshape', [qkv, i64('shape_b', [B, S, 3 * D])])], 3, { axis: 2, num_outputs: 3 }); // [B,S,D]
    const pos = node('Reshape', ['pos', i64('shape_pos', [B, S])]);
    const rope = (t) => node('RotaryEmbedding', [t, pos, 'cos', 'sin'], 1, { interleaved: 0, num_heads: H }, 'com.microsoft');
    o = node('Reshape', [node('MultiHeadAttention', [rope(q), rope(k), v], 1, { num_heads: H }, 'com.microsoft'), shFlat]); // scale 1/sqrt(hd)
  } else throw new Error(`attention variant must be std or mha, not ${attn}`);
  const x1 = node('Add', [x, affine(o, 'attn.proj', D, D)]);
  const h2 = rms(x1, 'norm2.weight');
  const gate = affine(h2, 'mlp.gate_proj', d.mlp, D), up = affine(h2, 'mlp.up_proj', d.mlp, D);
  const act = node('Mul', [node('Mul', [gate, node('Sigmoid', [gate])]), up]); // silu(gate) * up
  node('Add', [x1, affine(act, 'mlp.down_proj', D, d.mlp)]);
  nodes[nodes.length - 1].output = ['y'];

  const input = [vi('x', T.FLOAT, ['N', D]), vi('cos', T.FLOAT, ['N', hd / 2]), vi('sin', T.FLOAT, ['N', hd / 2])];
  if (attn === 'mha') input.push(vi('pos', T.INT64, [1, 'N']));
  return model({ name: `qwen25_vision_block_${seg ? 'window' : 'full'}_${attn}`, producer: 'tessera-bench-qwen25-peer', opset: 23, input, output: [vi('y', T.FLOAT, ['N', D])] });
}

const BLOCK_TENSORS = ['norm1.weight', 'norm2.weight', ...['attn.qkv', 'attn.proj', 'mlp.gate_proj', 'mlp.up_proj', 'mlp.down_proj'].flatMap((n) => [`${n}.weight`, `${n}.bias`])];

/**
 * Writes (once) the ONNX models of a tower folder's blocks: for each [block index, kind] of `blocks`
 * ('window' or 'full') and each variant, { [kind]: { std, mha } } file paths. The window graphs are for
 * windows of `seg` rows (whole windows: windowPatches² patches).
 */
export function writeBlockOnnx(tower, dir, blocks, d = Q25) {
  const files = {};
  const todo = [];
  for (const [l, kind] of blocks)
    for (const attn of ['std', 'mha']) {
      const f = join(dir, `qwen25_block${l}_${kind}_${attn}.onnx`);
      (files[kind] ??= {})[attn] = f;
      if (!existsSync(f)) todo.push([l, kind, attn, f]);
    }
  if (todo.length) {
    const { onnx } = require('onnx-proto');
    const names = blocks.flatMap(([l]) => BLOCK_TENSORS.map((n) => `model.visual.blocks.${l}.${n}`));
    const weights = readTensorsF32(join(tower, 'model.safetensors'), names);
    mkdirSync(dir, { recursive: true });
    for (const [l, kind, attn, f] of todo) {
      const w = (n) => weights[`model.visual.blocks.${l}.${n}`];
      writeFileSync(f + '.tmp', onnx.ModelProto.encode(buildBlockOnnx(onnx, w, attn, kind === 'window' ? d.windowPatches ** 2 : 0, d)).finish());
      renameSync(f + '.tmp', f); // never leave a half-written model behind
    }
  }
  return files;
}

/** Makes (once) and returns { tower, onnx: { window: { std, mha }, full: { std, mha } } }: the bench's 2-block stack. */
export function makeQwen25Stack(dir = OUT_DIR) {
  const tower = makeSyntheticQwen25(join(dir, 'qwen2_5_vl-synthetic-2blk'), { depth: STACK.depth, fullatt_block_indexes: STACK.full });
  return { tower, onnx: writeBlockOnnx(tower, dir, [[0, 'window'], [1, 'full']]) };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(makeQwen25Stack(), null, 1));
