// A safetensors file written as its tensors arrive (`tessera encode --out file.safetensors`): each
// tensor is appended to a scratch file beside the output (memory stays bounded for thousands of
// images); finish() writes the header, then the data, through an AtomicFile (layout:
// safetensors.ts), so a failed run never leaves a half-written file under the output name and
// never replaces anything but a regular file.
import { open } from 'node:fs/promises';
import { TesseraError } from '../errors.js';
import { ioError } from '../io/io-error.js';
import { safetensorsHeader } from './safetensors.js';
import { AtomicFile, checkOutputTarget, createScratchFile } from '../io/atomic-file.js';

type Dtype = 'F32' | 'BF16' | 'F16' | 'I64' | 'I32';
interface Entry {
  dtype: Dtype;
  shape: number[];
  data_offsets: [number, number];
}

type Scratch = Awaited<ReturnType<typeof createScratchFile>>;

const COPY_CHUNK = 1 << 20;

export class SafetensorsWriter {
  readonly path: string;
  #scratch: Scratch;
  #open = true;
  #entries = new Map<string, Entry>();
  #offset = 0;

  private constructor(path: string, scratch: Scratch) {
    this.path = path;
    this.#scratch = scratch;
  }

  /** Refuses a target that is not a regular file before any work is done. */
  static async create(path: string): Promise<SafetensorsWriter> {
    await checkOutputTarget(path);
    return new SafetensorsWriter(path, await createScratchFile(path, 'data'));
  }

  /** `dtype` names what a Uint16Array holds (BF16 or F16 bits); the other arrays say it themselves. */
  async add(name: string, shape: number[], values: Float32Array | Uint16Array | BigInt64Array | Int32Array, dtype?: Dtype): Promise<void> {
    if (!this.#open) throw new TesseraError('ERR_INTERNAL', 'safetensors writer already finished');
    if (this.#entries.has(name)) throw new TesseraError('ERR_INTERNAL', `tensor ${name} written twice`);
    if (values instanceof Uint16Array && dtype !== 'BF16' && dtype !== 'F16') throw new TesseraError('ERR_INTERNAL', `tensor ${name}: 16-bit values need their dtype (BF16 or F16)`);
    dtype ??= values instanceof Float32Array ? 'F32' : values instanceof BigInt64Array ? 'I64' : 'I32';
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    try {
      let done = 0;
      while (done < bytes.length) done += (await this.#scratch.handle.write(bytes, done, bytes.length - done)).bytesWritten;
    } catch (e) {
      await this.abort();
      throw ioError(this.path, 'cannot write', e);
    }
    this.#entries.set(name, { dtype, shape, data_offsets: [this.#offset, this.#offset + bytes.length] });
    this.#offset += bytes.length;
  }

  /** Writes the file: header (with __metadata__, string values only) then the data. */
  async finish(metadata: Record<string, string>): Promise<void> {
    this.#open = false;
    let out: AtomicFile | undefined;
    try {
      out = await AtomicFile.create(this.path);
      await out.write(safetensorsHeader(this.#entries, metadata));
      await this.#copyScratchTo(out);
      await out.commit();
    } catch (e) {
      await out?.abort();
      throw ioError(this.path, 'cannot write', e);
    } finally {
      await this.#scratch.remove();
    }
  }

  async #copyScratchTo(out: AtomicFile): Promise<void> {
    await this.#scratch.handle.close();
    const src = await open(this.#scratch.path, 'r');
    try {
      const buf = Buffer.allocUnsafe(COPY_CHUNK);
      for (let at = 0; at < this.#offset; ) {
        const { bytesRead } = await src.read(buf, 0, Math.min(COPY_CHUNK, this.#offset - at), at);
        if (bytesRead === 0) throw new TesseraError('ERR_IO', `${this.path}: the staged data ended early`);
        await out.write(buf.subarray(0, bytesRead));
        at += bytesRead;
      }
    } finally {
      await src.close();
    }
  }

  async abort(): Promise<void> {
    this.#open = false;
    await this.#scratch.remove();
  }
}
