// `--out file.safetensors`: tensors are appended to a side file as results arrive (memory stays
// bounded for thousands of images); finish() writes the header, then the data, and renames the
// result into place, so a failed run never leaves a half-written file under the output name.
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { TesseraError } from '../errors.js';

type Dtype = 'F32' | 'I64' | 'I32';
interface Entry {
  dtype: Dtype;
  shape: number[];
  data_offsets: [number, number];
}

export class SafetensorsWriter {
  readonly path: string;
  #dataPath: string;
  #data: FileHandle | undefined;
  #entries = new Map<string, Entry>();
  #offset = 0;

  private constructor(path: string, data: FileHandle) {
    this.path = path;
    this.#dataPath = `${path}.tessera-data-${process.pid}`;
    this.#data = data;
  }

  static async create(path: string): Promise<SafetensorsWriter> {
    const dataPath = `${path}.tessera-data-${process.pid}`;
    try {
      return new SafetensorsWriter(path, await open(dataPath, 'w'));
    } catch (e) {
      throw new TesseraError('ERR_INVALID_ARGUMENT', `--out ${path}: cannot write there (${(e as NodeJS.ErrnoException).code ?? e})`);
    }
  }

  async add(name: string, shape: number[], values: Float32Array | BigInt64Array | Int32Array): Promise<void> {
    if (!this.#data) throw new TesseraError('ERR_INTERNAL', 'safetensors writer already finished');
    if (this.#entries.has(name)) throw new TesseraError('ERR_INTERNAL', `tensor ${name} written twice`);
    const dtype: Dtype = values instanceof Float32Array ? 'F32' : values instanceof BigInt64Array ? 'I64' : 'I32';
    const bytes = new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    await this.#data.write(bytes, 0, bytes.length);
    this.#entries.set(name, { dtype, shape, data_offsets: [this.#offset, this.#offset + bytes.length] });
    this.#offset += bytes.length;
  }

  /** Writes the file: header (with __metadata__, string values only) then the data. */
  async finish(metadata: Record<string, string>): Promise<void> {
    await this.#data?.close();
    this.#data = undefined;
    const header: Record<string, unknown> = { __metadata__: metadata };
    for (const [k, v] of this.#entries) header[k] = v;
    let text = JSON.stringify(header);
    text += ' '.repeat((8 - ((8 + Buffer.byteLength(text)) % 8)) % 8); // data starts 8-byte aligned
    const tmp = `${this.path}.tessera-tmp-${process.pid}`;
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
    const out = createWriteStream(tmp);
    out.write(len);
    out.write(text);
    await pipeline(createReadStream(this.#dataPath), out);
    await rename(tmp, this.path);
    await rm(this.#dataPath, { force: true });
  }

  async abort(): Promise<void> {
    await this.#data?.close().catch(() => undefined);
    this.#data = undefined;
    await rm(this.#dataPath, { force: true });
  }
}
