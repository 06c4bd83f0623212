// The bytes torch.save writes for one dense CPU tensor, written without Python: what vLLM's own
// tensor2base64 (vllm/utils/serial_utils.py) base64-encodes, and what every vLLM release's
// ImageEmbeddingMediaIO reads with torch.load(weights_only=True) (releases before 0.19 read
// nothing else; see docs/downstream.md).
//
// torch.save's format is a zip archive, every member stored (not compressed), each member's data
// starting on a 64-byte boundary (torch pads the local header's extra field), with members
//   archive/data.pkl    the pickle (protocol 2) of torch._utils._rebuild_tensor_v2(storage,
//                       offset 0, size, stride, requires_grad False, OrderedDict()), the storage
//                       a persistent id ('storage', torch.<Type>Storage, '0', 'cpu', numel)
//   archive/byteorder   "little" (torch 2.1 and later write it; earlier ones ignore it)
//   archive/data/0      the storage's bytes
//   archive/version     "3\n" (the zip serialization format's version)
// The pickle is fixed but for the numbers, so it is written opcode by opcode here rather than by
// a general pickler; the weights-only unpickler allows exactly these globals.
import { crc32 } from 'node:zlib';
import { TesseraError } from '../errors.js';
import type { OutputTensor } from './tensors.js';

/** torch's storage class for each tensor dtype tessera writes. */
const STORAGE: Record<OutputTensor['dtype'], string> = { F32: 'FloatStorage', BF16: 'BFloat16Storage', F16: 'HalfStorage', I64: 'LongStorage' };

/** torch aligns every member's data to this many bytes (PyTorchStreamWriter's kFieldAlignment). */
const ALIGN = 64;

/** The pickle opcodes used (pickletools names). */
const OP = {
  PROTO: 0x80, GLOBAL: 0x63, BINPUT: 0x71, MARK: 0x28, BINUNICODE: 0x58, TUPLE: 0x74, BINPERSID: 0x51,
  BININT1: 0x4b, BININT2: 0x4d, BININT: 0x4a, TUPLE1: 0x85, TUPLE2: 0x86, TUPLE3: 0x87, NEWFALSE: 0x89,
  EMPTY_TUPLE: 0x29, REDUCE: 0x52, STOP: 0x2e,
} as const;

class Pickle {
  private readonly bytes: number[] = [];
  private memo = 0;
  op(code: number): this {
    this.bytes.push(code);
    return this;
  }
  /** BINPUT after each object the way Python's pickler memoizes them (the loader ignores the slots). */
  put(): this {
    return this.op(OP.BINPUT).op(this.memo++);
  }
  global(module: string, name: string): this {
    this.op(OP.GLOBAL).bytes.push(...Buffer.from(`${module}\n${name}\n`, 'latin1'));
    return this.put();
  }
  str(s: string): this {
    const b = Buffer.from(s, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32LE(b.length);
    this.op(OP.BINUNICODE).bytes.push(...len, ...b);
    return this.put();
  }
  /** A non-negative int as Python's pickler writes it (the smallest of BININT1, BININT2, BININT). */
  int(n: number): this {
    if (!Number.isInteger(n) || n < 0 || n > 0x7fffffff) throw new TesseraError('ERR_INVALID_ARGUMENT', `torch.save encoding: ${n} is not an int this writer supports`);
    if (n < 0x100) return this.op(OP.BININT1).op(n);
    if (n < 0x10000) return this.op(OP.BININT2).op(n & 0xff).op(n >> 8);
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    this.op(OP.BININT).bytes.push(...b);
    return this;
  }
  /** A tuple of ints (sizes, strides), as Python pickles one of that length. */
  ints(values: readonly number[]): this {
    if (values.length > 3) this.op(OP.MARK);
    for (const v of values) this.int(v);
    this.op(values.length === 0 ? OP.EMPTY_TUPLE : values.length > 3 ? OP.TUPLE : [OP.TUPLE1, OP.TUPLE2, OP.TUPLE3][values.length - 1]!);
    return this.put();
  }
  build(): Buffer {
    return Buffer.from(this.bytes);
  }
}

/** The pickle of torch._utils._rebuild_tensor_v2 for a contiguous tensor of this shape in storage '0'. */
function tensorPickle(t: OutputTensor): Buffer {
  const numel = t.shape.reduce((a, b) => a * b, 1);
  const stride = t.shape.map((_, i) => t.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const p = new Pickle().op(OP.PROTO).op(2);
  p.global('torch._utils', '_rebuild_tensor_v2').op(OP.MARK);
  p.op(OP.MARK).str('storage').global('torch', STORAGE[t.dtype]).str('0').str('cpu').int(numel).op(OP.TUPLE).put();
  p.op(OP.BINPERSID).int(0).ints(t.shape).ints(stride).op(OP.NEWFALSE);
  p.global('collections', 'OrderedDict').op(OP.EMPTY_TUPLE).op(OP.REDUCE).put();
  p.op(OP.TUPLE).put().op(OP.REDUCE).put().op(OP.STOP);
  return p.build();
}

interface Member {
  name: string;
  data: Buffer;
}

/** A zip archive of stored members whose data start on ALIGN-byte boundaries, as torch writes it. */
function alignedZip(members: readonly Member[]): Buffer {
  const chunks: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const m of members) {
    const name = Buffer.from(m.name, 'utf8');
    const fixed = 30 + name.length;
    // The extra field ("FB", its length, then zeros) pads the header so that the data is aligned.
    const pad = (ALIGN - ((offset + fixed + 4) % ALIGN)) % ALIGN;
    const extra = Buffer.alloc(4 + pad);
    extra.write('FB', 0, 'latin1');
    extra.writeUInt16LE(pad, 2);
    const crc = crc32(m.data);
    if (m.data.length > 0xfffffffe || offset > 0xfffffffe)
      throw new TesseraError('ERR_INVALID_ARGUMENT', `torch.save encoding: ${m.name} is past 4 GiB (zip64 is not written)`);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0x0800, 6); // flags: names are UTF-8
    local.writeUInt16LE(0, 8); // stored
    local.writeUInt32LE(0, 10); // DOS time and date
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(m.data.length, 18);
    local.writeUInt32LE(m.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(extra.length, 28);
    chunks.push(local, name, extra, m.data);
    const entry = Buffer.alloc(46);
    entry.writeUInt32LE(0x02014b50, 0);
    entry.writeUInt16LE(20, 4); // made by
    entry.writeUInt16LE(20, 6); // version needed
    entry.writeUInt16LE(0x0800, 8);
    entry.writeUInt16LE(0, 10);
    entry.writeUInt32LE(0, 12);
    entry.writeUInt32LE(crc, 16);
    entry.writeUInt32LE(m.data.length, 20);
    entry.writeUInt32LE(m.data.length, 24);
    entry.writeUInt16LE(name.length, 28);
    entry.writeUInt32LE(offset, 42);
    central.push(entry, name);
    offset += fixed + extra.length + m.data.length;
  }
  const centralBytes = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(members.length, 8);
  end.writeUInt16LE(members.length, 10);
  end.writeUInt32LE(centralBytes.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...chunks, centralBytes, end]);
}

/** The whole torch.save file for one tensor (little-endian data, C order). */
export function torchSaveBytes(t: OutputTensor): Buffer {
  return alignedZip([
    { name: 'archive/data.pkl', data: tensorPickle(t) },
    { name: 'archive/byteorder', data: Buffer.from('little', 'latin1') },
    { name: 'archive/data/0', data: Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength) },
    { name: 'archive/version', data: Buffer.from('3\n', 'latin1') },
  ]);
}
