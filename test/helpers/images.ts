// Shared by the image/preprocess tests: fixture paths and a minimal safetensors reader (the
// fixtures' pixel_values_u8 / pixel_values / image_grid_thw / positions).
import { readFileSync } from 'node:fs';
import { deflateSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

export const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));
export const IMAGES = FIXTURES + 'images/';

export interface Tensor {
  dtype: string;
  shape: number[];
  bytes: Uint8Array;
}

export function readSafetensors(path: string): Record<string, Tensor> {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const base = 8 + n;
  const out: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    // Copy so that typed views over the bytes are aligned.
    const bytes = new Uint8Array(buf.subarray(base + t.data_offsets[0], base + t.data_offsets[1]));
    out[name] = { dtype: t.dtype, shape: t.shape, bytes };
  }
  return out;
}

export function asFloat32(t: Tensor): Float32Array {
  if (t.dtype !== 'F32') throw new Error(`expected F32, got ${t.dtype}`);
  return new Float32Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 4);
}

export function asInt64Numbers(t: Tensor): number[] {
  if (t.dtype !== 'I64') throw new Error(`expected I64, got ${t.dtype}`);
  const v = new BigInt64Array(t.bytes.buffer, t.bytes.byteOffset, t.bytes.byteLength / 8);
  return Array.from(v, (x) => Number(x));
}

export function readJson<T = unknown>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

function crc32(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type: string, data: Buffer): Buffer {
  const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
/** An 8-bit RGB PNG claiming width x height, with `rows` rows of pixel data (0: no IDAT at all). */
export function pngClaiming(width: number, height: number, rows: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const parts = [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr)];
  if (rows > 0) {
    const raw = Buffer.alloc(rows * (1 + width * 3), 0x40);
    for (let r = 0; r < rows; r++) raw[r * (1 + width * 3)] = 0; // filter type None
    parts.push(chunk('IDAT', deflateSync(raw)));
  }
  parts.push(chunk('IEND', Buffer.alloc(0)));
  return Buffer.concat(parts);
}
