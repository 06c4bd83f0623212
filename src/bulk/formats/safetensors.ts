// The safetensors layout tessera writes (--out and --out-dir): an 8-byte little-endian header
// length, the JSON header (tensor name -> dtype, shape, data_offsets; `__metadata__` holds strings
// only), padded with spaces so the data starts 8-byte aligned, then the tensors' bytes in order.
import { open } from 'node:fs/promises';
import type { OutputTensor } from './tensors.js';

export interface SafetensorsEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/** The length prefix and header for these entries (offsets relative to the data start). */
export function safetensorsHeader(entries: Iterable<[string, SafetensorsEntry]>, metadata: Record<string, string>): Buffer {
  const header: Record<string, unknown> = { __metadata__: metadata };
  for (const [k, v] of entries) header[k] = v;
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - ((8 + Buffer.byteLength(text)) % 8)) % 8); // data starts 8-byte aligned
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  return Buffer.concat([len, Buffer.from(text)]);
}

/** One whole safetensors file holding `tensors` (per-image outputs are small enough to build in memory). */
export function safetensorsBytes(tensors: readonly OutputTensor[], metadata: Record<string, string>): Buffer {
  const entries: [string, SafetensorsEntry][] = [];
  let offset = 0;
  for (const t of tensors) {
    entries.push([t.name, { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.byteLength] }]);
    offset += t.data.byteLength;
  }
  return Buffer.concat([
    safetensorsHeader(entries, metadata),
    ...tensors.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength)),
  ]);
}

/** The __metadata__ of a safetensors file's header (bounded read), or undefined when it is not one. */
export async function readSafetensorsMetadata(path: string): Promise<Record<string, string> | undefined> {
  const fh = await open(path, 'r').catch(() => undefined);
  if (!fh) return undefined;
  try {
    const lenBuf = Buffer.alloc(8);
    if ((await fh.read(lenBuf, 0, 8, 0)).bytesRead !== 8) return undefined;
    const n = Number(lenBuf.readBigUInt64LE(0));
    if (n <= 0 || n > 1 << 24) return undefined;
    const text = Buffer.alloc(n);
    if ((await fh.read(text, 0, n, 8)).bytesRead !== n) return undefined;
    const header = JSON.parse(text.toString('utf8')) as { __metadata__?: Record<string, string> };
    return header.__metadata__;
  } catch {
    return undefined;
  } finally {
    await fh.close();
  }
}
