// Refills a tower folder's weights (written as bf16) with tessera's deterministic synthetic fill (src/synthetic.ts: xorshift32,
// matrices ~ U(-a, a) with a = sqrt(3 / fan_in), biases ±0.02, norm weights 1, position tables ±0.5), so that a
// second host makes the very same folder from the tensor list alone: the full-size f16 check runs HF on a host with
// a GPU and the emulator, which takes far longer at full size, on another host, each side from the same bytes.
//   node verify/bf16-check/refill.mjs MODEL_DIR --list FILE        refill MODEL_DIR/model.safetensors in place
//                                                                  and write its tensor list (names, shapes) to FILE
//   node verify/bf16-check/refill.mjs MODEL_DIR --from FILE        write MODEL_DIR/model.safetensors from that list
// (config.json and preprocessor_config.json are copied beside it by hand). Prints the file's sha256.
import { createHash } from 'node:crypto';
import { closeSync, openSync, readFileSync, readSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { writeRandomBf16 } from '../../dist/synthetic.js';

function header(path) {
  const fd = openSync(path, 'r');
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const text = Buffer.alloc(Number(len.readBigUInt64LE(0)));
    readSync(fd, text, 0, text.length, 8);
    return JSON.parse(text.toString('utf8'));
  } finally {
    closeSync(fd);
  }
}

/** The fill of a tensor, from its name and shape, as the synthetic writers choose it. */
function kind(name, shape) {
  if (/pos(ition)?_embed/.test(name)) return 'e';
  if (name.endsWith('.bias')) return 'b';
  return shape.length <= 1 ? 'one' : 'w';
}

const [dir, mode, file] = process.argv.slice(2);
const weights = join(dir, 'model.safetensors');
let list;
if (mode === '--list') {
  const h = header(weights);
  list = Object.entries(h).filter(([n]) => n !== '__metadata__').sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]).map(([name, t]) => {
    if (!['BF16', 'F16', 'F32'].includes(t.dtype)) throw new Error(`${weights}: ${name} is ${t.dtype}, not a float (written as BF16)`);
    return { name, shape: t.shape, kind: kind(name, t.shape) };
  });
  writeFileSync(file, JSON.stringify(list));
} else if (mode === '--from') {
  list = JSON.parse(readFileSync(file, 'utf8'));
} else {
  throw new Error('usage: refill.mjs MODEL_DIR --list FILE | --from FILE');
}
writeRandomBf16(weights, list);
// Gemma 4's clamp bounds (0-d <linear>.{input,output}_{min,max}): a fill of 1 would clamp every activation to [1, 1];
// ±32,768 (exact in bf16) leaves them idle, as HF's init does
const bounds = list.map((t, i) => [t, i]).filter(([t]) => t.shape.length === 0 && /_(min|max)$/.test(t.name));
if (bounds.length) {
  const fd = openSync(weights, 'r+');
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const h = header(weights);
    for (const [t] of bounds) writeSync(fd, Buffer.from(t.name.endsWith('_min') ? [0x00, 0xc7] : [0x00, 0x47]), 0, 2, 8 + Number(len.readBigUInt64LE(0)) + h[t.name].data_offsets[0]);
  } finally {
    closeSync(fd);
  }
}
console.log(`refill: ${weights}: ${list.length} tensors, sha256 ${createHash('sha256').update(readFileSync(weights)).digest('hex')}`);
