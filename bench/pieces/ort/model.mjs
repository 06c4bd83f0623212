// The block stack both engines run in the side-by-side bench (bench/pieces/ort-peer.mjs):
// a synthetic Qwen3.5-size tower of DEPTH blocks (hidden 1152, 16 heads of 72, MLP 4304) written as
// an HF folder with bf16 weights for tessera, and the same blocks, with the same weights widened to
// f32, written as ONNX models for onnxruntime in two attention variants:
//   std: Reshape/Transpose/Split/MatMul/Softmax/MatMul (ORT fuses the scale and the transposes into
//        FusedMatMul; it materialises [16, N, N] scores), rope from plain elementwise ops;
//   mha: com.microsoft RotaryEmbedding + com.microsoft MultiHeadAttention (ORT's fused kernels).
// Both compute tessera's block exactly (docs/models/qwen-vision.md#rope, #attention, #block), so the
// outputs are compared in every bench run.
//   node bench/pieces/ort/model.mjs      (writes bench/out/ort-peer-v1/, prints the paths)
// Nothing here is committed: ~125 MiB of safetensors and 2 x ~235 MiB of ONNX, made on first use.
import { closeSync, existsSync, mkdirSync, openSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeSyntheticQwen } from '../../make-synthetic-qwen.mjs';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('../../..', import.meta.url));

export const DEPTH = 4;
export const HIDDEN = 1152, HEADS = 16, HEAD_DIM = 72, MLP = 4304, EPS = 1e-6;
// Bump when the generated graphs change, so that stale files are not reused.
const VERSION = 'v1';
export const OUT_DIR = join(root, 'bench', 'out', `ort-peer-${VERSION}`);

/** FLOPs of one block at N patches (one image): the four weight GEMMs and the two attention products. */
export const blockFlops = (N) => 2 * N * (HIDDEN * 3 * HIDDEN + HIDDEN * HIDDEN + 2 * HIDDEN * MLP) + 4 * N * N * HIDDEN;

/** The four weight GEMMs of a block as [M, K, N'] at N patches (the roofline measures these). */
export const blockGemms = (N) => [[N, HIDDEN, 3 * HIDDEN], [N, HIDDEN, HIDDEN], [N, HIDDEN, MLP], [N, MLP, HIDDEN]];

// ---- reading the bf16 safetensors back (the ONNX weights are the very same values) -------------
export function readTensorsF32(file, names) {
  const fd = openSync(file, 'r');
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const hlen = Number(len.readBigUInt64LE());
    const hbuf = Buffer.alloc(hlen);
    readSync(fd, hbuf, 0, hlen, 8);
    const header = JSON.parse(hbuf.toString('utf8'));
    const out = {};
    for (const name of names) {
      const h = header[name];
      if (!h || h.dtype !== 'BF16') throw new Error(`${file}: no BF16 tensor ${name}`);
      const [a, b] = h.data_offsets;
      const raw = Buffer.alloc(b - a);
      readSync(fd, raw, 0, b - a, 8 + hlen + a);
      const f = new Float32Array((b - a) / 2), u = new Uint32Array(f.buffer);
      for (let i = 0; i < f.length; i++) u[i] = raw.readUInt16LE(2 * i) << 16; // bf16 -> f32 is exact
      out[name] = { shape: h.shape, data: f };
    }
    return out;
  } finally {
    closeSync(fd);
  }
}

// HF Linear weight [out, in] -> ONNX MatMul operand [in, out].
export function transpose(w, rows, cols) {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = w[r * cols + c];
  return t;
}

// ---- ONNX graph -------------------------------------------------------------------------------
/**
 * An ONNX graph under construction: node(op, inputs, nOut, attrs, domain) appends a node and returns its
 * output name(s); f32 / i64 add initializers; vi types a graph input or output; model(...) wraps it all.
 */
export function graphBuilder(onnx) {
  const A = onnx.AttributeProto.AttributeType, T = onnx.TensorProto.DataType;
  const attr = (name, v) => {
    if (typeof v === 'string') return { name, type: A.STRING, s: Buffer.from(v) };
    if (Array.isArray(v)) return { name, type: A.INTS, ints: v };
    if (typeof v === 'object' && v.float !== undefined) return { name, type: A.FLOAT, f: v.float };
    return { name, type: A.INT, i: v };
  };
  const nodes = [], inits = [];
  let uid = 0;
  const node = (op, inputs, nOut = 1, attrs = {}, domain = '') => {
    const outputs = Array.from({ length: nOut }, () => `${op}_${uid++}`);
    nodes.push({ opType: op, domain, name: `n_${op}_${uid++}`, input: inputs, output: outputs,
      attribute: Object.entries(attrs).map(([k, v]) => attr(k, v)) });
    return nOut === 1 ? outputs[0] : outputs;
  };
  const f32 = (name, dims, data) => {
    inits.push({ name, dims, dataType: T.FLOAT, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) });
    return name;
  };
  const i64 = (name, vals) => {
    const d = BigInt64Array.from(vals.map(BigInt));
    inits.push({ name, dims: [vals.length], dataType: T.INT64, rawData: new Uint8Array(d.buffer) });
    return name;
  };
  const vi = (name, elem, dims) => ({ name, type: { tensorType: { elemType: elem,
    shape: { dim: dims.map((d) => (typeof d === 'string' ? { dimParam: d } : { dimValue: d })) } } } });
  const model = ({ name, producer, opset = 20, input, output }) => onnx.ModelProto.create({
    irVersion: 9,
    producerName: producer,
    opsetImport: [{ domain: '', version: opset }, { domain: 'com.microsoft', version: 1 }],
    graph: { name, node: nodes, initializer: inits, input, output },
  });
  return { T, nodes, node, f32, i64, vi, model };
}

function buildOnnx(onnx, weights, attn) {
  const { T, nodes, node, f32, i64, vi, model } = graphBuilder(onnx);
  const shFlat = i64('shape_flat', [-1, HIDDEN]);
  const shHeads = i64('shape_heads', [-1, 3, HEADS, HEAD_DIM]);
  const split21 = i64('split_2_1', [2, 1]);
  const split36 = i64('split_36_36', [HEAD_DIM / 2, HEAD_DIM / 2]);
  const shRow1 = i64('shape_b1', [1, -1, 3 * HIDDEN]);
  let cos4, sin4, scale;
  if (attn === 'std') {
    // Rope tables come in as [N, 36] (the angles repeat: ang[j] = ang[j + 36], docs/models/qwen-vision.md#rope).
    const shRope = i64('shape_rope', [-1, 1, 1, HEAD_DIM]);
    cos4 = node('Reshape', [node('Concat', ['cos', 'cos'], 1, { axis: 1 }), shRope]);
    sin4 = node('Reshape', [node('Concat', ['sin', 'sin'], 1, { axis: 1 }), shRope]);
    scale = f32('attn_scale', [], Float32Array.of(1 / Math.sqrt(HEAD_DIM)));
  }
  const w = (l, n) => weights[`model.visual.blocks.${l}.${n}`];
  const lin = (l, n, rows, cols) => f32(`blk${l}.${n}.wT`, [cols, rows], transpose(w(l, n + '.weight').data, rows, cols));
  const vec = (l, n) => f32(`blk${l}.${n}`, [w(l, n).data.length], w(l, n).data);

  let x = 'x';
  for (let l = 0; l < DEPTH; l++) {
    const h1 = node('LayerNormalization', [x, vec(l, 'norm1.weight'), vec(l, 'norm1.bias')], 1, { axis: -1, epsilon: { float: EPS } });
    const qkv = node('Add', [node('MatMul', [h1, lin(l, 'attn.qkv', 3 * HIDDEN, HIDDEN)]), vec(l, 'attn.qkv.bias')]); // [N, 3456]
    let o; // [N, 1152]
    if (attn === 'std') {
      const [qk, v] = node('Split', [node('Reshape', [qkv, shHeads]), split21], 2, { axis: 1 }); // [N,2,16,72], [N,1,16,72]
      const [lo, hi] = node('Split', [qk, split36], 2, { axis: -1 });
      const rot = node('Concat', [node('Neg', [hi]), lo], 1, { axis: -1 });                 // [-x2, x1]
      const qkr = node('Add', [node('Mul', [qk, cos4]), node('Mul', [rot, sin4])]);
      const [q, k] = node('Split', [node('Transpose', [qkr], 1, { perm: [1, 2, 0, 3] })], 2, { axis: 0, num_outputs: 2 }); // [1,16,N,72]
      const vt = node('Transpose', [v], 1, { perm: [1, 2, 0, 3] });
      const s = node('MatMul', [node('Mul', [q, scale]), node('Transpose', [k], 1, { perm: [0, 1, 3, 2] })]); // [1,16,N,N]
      const ov = node('MatMul', [node('Softmax', [s], 1, { axis: -1 }), vt]);             // [1,16,N,72]
      o = node('Reshape', [node('Transpose', [ov], 1, { perm: [0, 2, 1, 3] }), shFlat]);
    } else if (attn === 'mha') {
      const [q, k, v] = node('Split', [node('Reshape', [qkv, shRow1])], 3, { axis: 2, num_outputs: 3 }); // [1,N,1152]
      const rope = (t) => node('RotaryEmbedding', [t, 'pos', 'cos', 'sin'], 1, { interleaved: 0, num_heads: HEADS }, 'com.microsoft');
      const m = node('MultiHeadAttention', [rope(q), rope(k), v], 1, { num_heads: HEADS }, 'com.microsoft'); // scale 1/sqrt(72)
      o = node('Reshape', [m, shFlat]);
    } else throw new Error(`attention variant must be std or mha, not ${attn}`);
    const x1 = node('Add', [x, node('Add', [node('MatMul', [o, lin(l, 'attn.proj', HIDDEN, HIDDEN)]), vec(l, 'attn.proj.bias')])]);
    const h2 = node('LayerNormalization', [x1, vec(l, 'norm2.weight'), vec(l, 'norm2.bias')], 1, { axis: -1, epsilon: { float: EPS } });
    const f1 = node('Add', [node('MatMul', [h2, lin(l, 'mlp.linear_fc1', MLP, HIDDEN)]), vec(l, 'mlp.linear_fc1.bias')]);
    const g = node('Gelu', [f1], 1, { approximate: 'tanh' });
    const f2 = node('Add', [node('MatMul', [g, lin(l, 'mlp.linear_fc2', HIDDEN, MLP)]), vec(l, 'mlp.linear_fc2.bias')]);
    x = node('Add', [x1, f2]);
  }
  nodes[nodes.length - 1].output = ['y'];

  const input = [vi('x', T.FLOAT, ['N', HIDDEN]), vi('cos', T.FLOAT, ['N', HEAD_DIM / 2]), vi('sin', T.FLOAT, ['N', HEAD_DIM / 2])];
  if (attn === 'mha') input.push(vi('pos', T.INT64, [1, 'N']));
  return model({ name: `qwen35_vision_${DEPTH}blk_${attn}`, producer: 'tessera-bench-ort-peer', input, output: [vi('y', T.FLOAT, ['N', HIDDEN])] });
}

/** Makes (once) and returns { tower, onnx: { std, mha } }: the tessera folder and the two ONNX files. */
export function makeBlockStack(dir = OUT_DIR) {
  const tower = makeSyntheticQwen(join(dir, 'qwen3_5-synthetic-4blk'), { depth: DEPTH });
  const files = { std: join(dir, `qwen35_${DEPTH}blk_std.onnx`), mha: join(dir, `qwen35_${DEPTH}blk_mha.onnx`) };
  const missing = Object.entries(files).filter(([, f]) => !existsSync(f));
  if (missing.length) {
    const { onnx } = require('onnx-proto');
    const names = [];
    for (let l = 0; l < DEPTH; l++)
      for (const n of ['norm1', 'norm2', 'attn.qkv', 'attn.proj', 'mlp.linear_fc1', 'mlp.linear_fc2'])
        names.push(`model.visual.blocks.${l}.${n}.weight`, `model.visual.blocks.${l}.${n}.bias`);
    const weights = readTensorsF32(join(tower, 'model.safetensors'), names);
    for (const [attn, file] of missing) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(file + '.tmp', onnx.ModelProto.encode(buildOnnx(onnx, weights, attn)).finish());
      renameSync(file + '.tmp', file); // never leave a half-written model behind
    }
  }
  return { tower, onnx: files };
}

// ---- inputs shared by both engines ------------------------------------------------------------
/** A patch grid of N patches (h, w even, as the 2x2 merger needs): as square as N allows. */
export function gridFor(N) {
  for (let h = Math.floor(Math.sqrt(N) / 2) * 2; h >= 2; h -= 2) if (N % h === 0 && (N / h) % 2 === 0) return { t: 1, h, w: N / h };
  throw new Error(`no even h x w grid has ${N} patches`);
}

/**
 * Rope tables [N, 36] for one image of grid h x w (docs/models/qwen-vision.md#token-order, #rope; the second
 * half of the 72 angles repeats the first, so 36 columns carry them all): what ORT gets as inputs. Rows in
 * the processor's order; Qwen2-VL's towers use the same tables at their head dim (headDim / 2 columns).
 */
export function ropeTables({ h, w }, m = 2, headDim = HEAD_DIM) {
  const q = headDim / 4, half = headDim / 2;
  const inv = Array.from({ length: q }, (_, j) => Math.fround(1 / Math.fround(10000 ** Math.fround((2 * j) / half))));
  const N = h * w, cos = new Float32Array(N * half), sin = new Float32Array(N * half);
  let t = 0;
  for (let br = 0; br < h / m; br++) for (let bc = 0; bc < w / m; bc++) for (let ir = 0; ir < m; ir++) for (let ic = 0; ic < m; ic++, t++) {
    const row = br * m + ir, col = bc * m + ic;
    for (let j = 0; j < q; j++) {
      const a = Math.fround(row * inv[j]), b = Math.fround(col * inv[j]);
      cos[t * half + j] = Math.cos(a), sin[t * half + j] = Math.sin(a);
      cos[t * half + q + j] = Math.cos(b), sin[t * half + q + j] = Math.sin(b);
    }
  }
  return { cos, sin };
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(JSON.stringify(makeBlockStack(), null, 1));
