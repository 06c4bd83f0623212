// Stage checksums of a packed folder: `tessera pack` records the SHA-256 of every stage's bytes
// (a block's whole stride, a stage's extent) in the manifest; open(..., { verify: true }) reads
// each stage once and compares. One stage is read at a time, in 4 MiB pieces, so verifying
// costs one pass over the file and no more memory than a piece.
import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { TesseraError } from '../errors.js';
import { stageRanges, type PackManifest } from './manifest.js';

const PIECE = 4 * 1024 * 1024;

export async function sha256Range(fh: FileHandle, offset: number, length: number, path: string): Promise<string> {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(Math.min(PIECE, Math.max(1, length)));
  for (let done = 0; done < length; ) {
    const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, length - done), offset + done);
    if (bytesRead === 0) throw new TesseraError('ERR_WEIGHTS_CORRUPT', `${path}: ends inside bytes [${offset}, ${offset + length})`);
    hash.update(buf.subarray(0, bytesRead));
    done += bytesRead;
  }
  return hash.digest('hex');
}

/** Records each stage's checksum in `m` (after the weights file is written). */
export async function recordChecksums(m: PackManifest, fh: FileHandle, path: string): Promise<void> {
  for (const b of m.blocks.entries) b.sha256 = await sha256Range(fh, b.offset, m.blocks.stride, path);
  for (const s of m.stages) s.sha256 = await sha256Range(fh, s.offset, s.length, path);
}

/** ERR_WEIGHTS_CORRUPT naming the first stage whose bytes differ from the recorded checksum. */
export async function verifyChecksums(m: PackManifest, fh: FileHandle, path: string, where: string): Promise<void> {
  const ranges = stageRanges(m);
  const missing = ranges.find((r) => r.sha256 === undefined);
  if (missing)
    throw new TesseraError('ERR_INVALID_ARGUMENT', `${where}: stage '${missing.name}' has no recorded checksum (packed by an older tessera): pack it again to use verify`);
  for (const r of ranges) {
    const got = await sha256Range(fh, r.offset, r.length, path);
    if (got !== r.sha256)
      throw new TesseraError('ERR_WEIGHTS_CORRUPT', `${path}: stage '${r.name}' (bytes ${r.offset}..${r.offset + r.length}) does not match its checksum in ${where}: the file changed after packing`);
  }
}
