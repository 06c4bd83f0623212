// Builds broken and altered model folders in a temp dir from a fixture model, for error tests.
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function copyModel(src: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tessera-model-'));
  cpSync(src, dir, { recursive: true });
  return dir;
}

export function editConfig(dir: string, edit: (c: any) => void): void {
  const p = join(dir, 'config.json');
  const c = JSON.parse(readFileSync(p, 'utf8'));
  edit(c);
  writeFileSync(p, JSON.stringify(c));
}

export interface RawSafetensors {
  header: Record<string, any>;
  data: Buffer;
}

export function readRaw(path: string): RawSafetensors {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  return { header: JSON.parse(buf.subarray(8, 8 + n).toString('utf8')), data: buf.subarray(8 + n) };
}

/** Writes a safetensors file from a header object (or raw header text) and a data section. */
export function writeRaw(path: string, header: Record<string, any> | string, data: Buffer, lengthOverride?: bigint): void {
  const text = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(lengthOverride ?? BigInt(text.length));
  writeFileSync(path, Buffer.concat([len, text, data]));
}
