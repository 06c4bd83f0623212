// A reader for the zip archives torch.save writes, for the tests, independent of the writer
// (src/outputs/torch-save.ts): members found through the central directory, each member's
// data located through its local header, checked against its CRC-32, its offset returned so a
// test can check torch's 64-byte alignment.
import { crc32 } from 'node:zlib';

export interface ZipMember {
  data: Buffer;
  dataOffset: number;
  method: number;
}

export function readStoredZip(buf: Buffer): Map<string, ZipMember> {
  const end = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (end < 0) throw new Error('no end of central directory');
  const count = buf.readUInt16LE(end + 10);
  let at = buf.readUInt32LE(end + 16);
  const members = new Map<string, ZipMember>();
  for (let i = 0; i < count; i++) {
    if (buf.readUInt32LE(at) !== 0x02014b50) throw new Error(`bad central directory entry ${i}`);
    const method = buf.readUInt16LE(at + 10);
    const crc = buf.readUInt32LE(at + 16);
    const size = buf.readUInt32LE(at + 20);
    const nameLen = buf.readUInt16LE(at + 28);
    const extraLen = buf.readUInt16LE(at + 30);
    const commentLen = buf.readUInt16LE(at + 32);
    const local = buf.readUInt32LE(at + 42);
    const name = buf.subarray(at + 46, at + 46 + nameLen).toString('utf8');
    if (buf.readUInt32LE(local) !== 0x04034b50) throw new Error(`bad local header for ${name}`);
    const dataOffset = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const data = buf.subarray(dataOffset, dataOffset + size);
    if (crc32(data) !== crc) throw new Error(`CRC mismatch in ${name}`);
    members.set(name, { data, dataOffset, method });
    at += 46 + nameLen + extraLen + commentLen;
  }
  return members;
}
