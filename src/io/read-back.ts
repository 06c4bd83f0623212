// Reading back what tessera wrote in an output folder (records, outputs checked on resume): the
// file is opened with O_NOFOLLOW | O_NONBLOCK, so a symbolic link is not followed and a FIFO cannot
// block the open, then fstat'ed on the open descriptor and used only when it is a regular file.
// Anything else in its place (missing, a link, a FIFO, a device, a directory) is "not ours": the
// caller redoes the image, and the writer (atomic-file.ts) refuses the non-regular target by name.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';

/** The file at `path` opened for reading when it is a regular file (not through a link); else undefined. The caller closes it. */
export async function openOwnFile(path: string): Promise<{ handle: FileHandle; size: number } | undefined> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW).catch(() => undefined);
  if (!handle) return undefined;
  const st = await handle.stat().catch(() => undefined);
  if (st?.isFile()) return { handle, size: st.size };
  await handle.close().catch(() => undefined);
  return undefined;
}

/** The bytes of a regular file at `path` up to `maxBytes`, or undefined (not a regular file, too large, unreadable). */
export async function readOwnFile(path: string, maxBytes: number): Promise<Buffer | undefined> {
  const f = await openOwnFile(path);
  if (!f) return undefined;
  try {
    if (f.size > maxBytes) return undefined;
    const buf = Buffer.alloc(f.size);
    let done = 0;
    while (done < f.size) {
      const { bytesRead } = await f.handle.read(buf, done, f.size - done, done);
      if (bytesRead === 0) return undefined;
      done += bytesRead;
    }
    return buf;
  } catch {
    return undefined;
  } finally {
    await f.handle.close().catch(() => undefined);
  }
}

/** SHA-256 (hex) of an open file's bytes from `start` to `end`, read in chunks (never the whole file at once). */
export async function sha256OfRange(handle: FileHandle, start: number, end: number): Promise<string> {
  const h = createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  let pos = start;
  while (pos < end) {
    const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, end - pos), pos);
    if (bytesRead === 0) break;
    h.update(buf.subarray(0, bytesRead));
    pos += bytesRead;
  }
  return h.digest('hex');
}
