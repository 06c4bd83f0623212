// A minimal .npy (version 1.0) reader for the tests: dtype, shape and the data, parsed from the
// header dict independently of the writer (src/outputs/npy.ts).
export interface Npy {
  descr: string;
  shape: number[];
  data: Float32Array | Uint16Array | BigInt64Array;
}

export function readNpy(buf: Uint8Array): Npy {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b[0] !== 0x93 || b.subarray(1, 6).toString('latin1') !== 'NUMPY') throw new Error('not an .npy file');
  if (b[6] !== 1) throw new Error(`npy version ${b[6]}`);
  const n = b.readUInt16LE(8);
  const header = b.subarray(10, 10 + n).toString('latin1');
  if ((10 + n) % 64 !== 0) throw new Error('npy data not 64-byte aligned');
  const descr = /'descr':\s*'([^']+)'/.exec(header)![1]!;
  if (!/'fortran_order':\s*False/.test(header)) throw new Error('fortran order');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)![1]!.split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const bytes = new Uint8Array(b.subarray(10 + n)); // aligned copy
  const data = descr === '<f4' ? new Float32Array(bytes.buffer) : descr === '<f2' ? new Uint16Array(bytes.buffer) : descr === '<i8' ? new BigInt64Array(bytes.buffer) : undefined;
  if (!data) throw new Error(`dtype ${descr}`);
  if (data.length !== shape.reduce((a, v) => a * v, 1)) throw new Error('npy size does not match its shape');
  return { descr, shape, data };
}
