// The packed folder's manifest (tessera-pack.json): the tower's description plus where each stage
// lives in one weights file, every stage contiguous and 16 KiB aligned so that the stream store
// reads a stage with one pread. Validated with zod, then checked the way the seed engine checked
// its packed blocks: a declared block count that disagrees with the depth, blocks out of range,
// duplicated or missing, a stride that disagrees with the tensors, stages past the end of the
// file or overlapping. Blocks may be listed in any order: each is placed by its own index.
import { z } from 'zod';
import { TesseraError } from '../errors.js';
import { elementCount, storedBytes } from '../formats/tensor-index.js';
import { addon } from '../native.js';
import { configError } from '../spec/tensors.js';
import { FAMILIES } from '../families/registry.js';
import { COMPUTE_DTYPES, DTYPES, STAGE_KINDS, type ComputeDType, type DType, type Family, type StageKind, type StageSpec, type TensorSpec, type TowerSpec } from '../spec/types.js';
import type { Assert, Equals } from '../type-equality.js';

export const MANIFEST_FILE = 'tessera-pack.json';
export const PACK_FORMAT = 'tessera-packed';
/** 2: tensor roles are HF names (docs/design.md#weight-names); version 1 packs used Gemma role tables. */
export const PACK_VERSION = 2;
/**
 * The alignments of the weights file, the native stores' own (native/io/weight_alignment.h, through
 * the addon): every stage starts on `stage` bytes (Apple silicon's page, a multiple of every other),
 * every tensor inside a stage on `tensor` (a cache line, the widest SIMD load).
 */
export function packAlignment(): { stage: number; tensor: number } {
  return addon().weightAlignment;
}

/** A tensor of a packed stage. */
export interface PackedTensor {
  role: string;
  name: string;
  dtype: DType;
  shape: number[];
  /** Bytes from the start of its stage. */
  offset: number;
  length: number;
}

/** A block's place in the weights file: each block spans blocks.stride bytes. */
export interface PackedBlock {
  index: number;
  offset: number;
  tensors: PackedTensor[];
  /** SHA-256 of the block's bytes (its whole aligned extent), lowercase hex. */
  sha256?: string;
}

/** A stage that is not a block. */
export interface PackedStage {
  name: string;
  kind: Exclude<StageKind, 'block'>;
  index: number;
  /** The block this stage runs after (-1: before the first block). */
  after: number;
  offset: number;
  length: number;
  tensors: PackedTensor[];
  sha256?: string;
}

/** tessera-pack.json. */
export interface PackManifest {
  format: typeof PACK_FORMAT;
  version: typeof PACK_VERSION;
  family: Family;
  /** What was packed: its source kind and path, and the dtype asked for (`pack --dtype`; null: each tensor kept as stored). */
  packedFrom: { source: string; path: string; dtype: ComputeDType | null };
  dims: Record<string, number>;
  lists: Record<string, number[]>;
  /** The source's preprocessor_config.json, kept for the packed tower's image pipeline. */
  preprocessorConfig: Record<string, unknown> | null;
  /** The weights file's name, inside the folder. */
  weights: string;
  weightsBytes: number;
  /** The stage alignment it was packed with (packAlignment().stage). */
  alignment: number;
  blocks: {
    /** How many blocks the pack holds: must equal dims.depth. */
    count: number;
    /** Bytes every block occupies in the file: its tensors' extent rounded up to the alignment. */
    stride: number;
    entries: PackedBlock[];
  };
  stages: PackedStage[];
}

const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const PackedTensorSchema = z
  .object({
    role: z.string().min(1),
    name: z.string().min(1),
    dtype: z.enum(DTYPES),
    shape: z.array(count),
    offset: count,
    length: count,
  })
  .strict();

/** SHA-256 of a stage's bytes in the weights file (its whole aligned extent), lowercase hex. */
const sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in lowercase hex');

const PackedBlockSchema = z.object({ index: count, offset: count, tensors: z.array(PackedTensorSchema), sha256: sha256.optional() }).strict();

const PackedStageSchema = z
  .object({
    name: z.string().min(1),
    kind: z.enum(STAGE_KINDS).exclude(['block']),
    index: count,
    after: z.number().int().min(-1),
    offset: count,
    length: count,
    tensors: z.array(PackedTensorSchema),
    sha256: sha256.optional(),
  })
  .strict();

const PackManifestSchema = z
  .object({
    format: z.literal(PACK_FORMAT),
    version: z.literal(PACK_VERSION),
    family: z.enum(FAMILIES),
    packedFrom: z.object({ source: z.string(), path: z.string(), dtype: z.enum(COMPUTE_DTYPES).nullable() }).strict(),
    dims: z.record(z.string(), z.number()),
    lists: z.record(z.string(), z.array(z.number())),
    preprocessorConfig: z.record(z.string(), z.unknown()).nullable(),
    weights: z.string().regex(/^[^/\\]+$/, 'a file name inside the folder'),
    weightsBytes: count,
    alignment: count.refine((v) => v === packAlignment().stage, 'must be the stage alignment this tessera packs and reads'),
    blocks: z
      .object({
        count,
        stride: count,
        entries: z.array(PackedBlockSchema),
      })
      .strict(),
    stages: z.array(PackedStageSchema),
  })
  .strict();

type _PackManifestAgrees = Assert<Equals<z.output<typeof PackManifestSchema>, PackManifest>>;
type _PackedTensorAgrees = Assert<Equals<z.output<typeof PackedTensorSchema>, PackedTensor>>;

const roundUp = (n: number, a: number) => Math.ceil(n / a) * a;
const corrupt = (where: string, msg: string) => new TesseraError('ERR_WEIGHTS_CORRUPT', `${where}: ${msg}`);

/** Every stage's byte range in the weights file (blocks span the stride), with its recorded checksum. */
export function stageRanges(m: PackManifest): { name: string; offset: number; length: number; sha256: string | undefined }[] {
  return [
    ...m.blocks.entries.map((b) => ({ name: `block.${b.index}`, offset: b.offset, length: m.blocks.stride, sha256: b.sha256 })),
    ...m.stages.map((s) => ({ name: s.name, offset: s.offset, length: s.length, sha256: s.sha256 })),
  ];
}

/** Parses the manifest's JSON text: bad JSON is ERR_WEIGHTS_CORRUPT, another format or version
 * ERR_MODEL_FORMAT, a field out of place ERR_CONFIG_INVALID naming it. */
export function parseManifest(text: string, where: string): PackManifest {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw corrupt(where, `not valid JSON (${(e as Error).message})`);
  }
  const head = json as { format?: unknown; version?: unknown } | null;
  if (typeof head !== 'object' || head === null || head.format !== PACK_FORMAT)
    throw new TesseraError('ERR_MODEL_FORMAT', `${where}: not a tessera packed manifest (format ${JSON.stringify(head?.format)})`);
  if (head.version !== PACK_VERSION)
    throw new TesseraError('ERR_MODEL_FORMAT', `${where}: packed format version ${JSON.stringify(head.version)}; this tessera reads version ${PACK_VERSION}`);
  const parsed = PackManifestSchema.safeParse(json);
  if (!parsed.success) throw configError(where, parsed.error);
  return parsed.data;
}

function checkTensors(where: string, tensors: PackedTensor[], room: number, what: string): number {
  let extent = 0;
  for (const t of tensors) {
    const want = storedBytes(t.dtype, elementCount(t.shape));
    if (t.length !== want)
      throw new TesseraError('ERR_TENSOR_SHAPE', `${where}: tensor '${t.name}' is ${t.length} bytes but [${t.shape.join(', ')}] ${t.dtype} needs ${want}`);
    extent = Math.max(extent, t.offset + t.length);
    if (t.offset + t.length > room)
      throw corrupt(where, `tensor '${t.name}' (bytes ${t.offset}..${t.offset + t.length}) does not fit in ${what} of ${room} bytes`);
  }
  return extent;
}

/**
 * The TowerSpec of a packed folder: stages in execution order, tensors at absolute offsets of
 * `weightsPath`, whose size on disk is `fileBytes`. Pure: the refusals are unit-tested on
 * manifests built in memory.
 */
export function specFromManifest(m: PackManifest, weightsPath: string, fileBytes: number, where: string): TowerSpec {
  const depth = m.dims['depth'];
  if (depth === undefined || !Number.isSafeInteger(depth) || depth < 0)
    throw new TesseraError('ERR_CONFIG_INVALID', `${where}: field 'dims.depth': required, a non-negative integer`);
  if (fileBytes !== m.weightsBytes)
    throw corrupt(where, `${weightsPath} is ${fileBytes} bytes but the manifest says ${m.weightsBytes} (truncated or changed)`);

  // Blocks: the declared count against the depth, then each entry by its own index.
  const { blocks } = m;
  if (blocks.count !== depth)
    throw new TesseraError('ERR_CONFIG_INVALID', `${where}: the pack holds ${blocks.count} blocks but the config's depth is ${depth}`);
  const byIndex = new Map<number, PackManifest['blocks']['entries'][number]>();
  for (const b of blocks.entries) {
    if (b.index >= depth) throw corrupt(where, `block ${b.index} is out of range (depth ${depth})`);
    if (byIndex.has(b.index)) throw corrupt(where, `block ${b.index} is listed twice`);
    byIndex.set(b.index, b);
  }
  for (let i = 0; i < depth; i++)
    if (!byIndex.has(i)) throw new TesseraError('ERR_TENSOR_MISSING', `${where}: block ${i} is missing (${byIndex.size} of ${depth} blocks packed)`);

  // The stride: every block occupies exactly `stride` bytes, its tensors' extent rounded up.
  if (depth > 0) {
    let extent = 0;
    for (const b of blocks.entries) extent = Math.max(extent, checkTensors(where, b.tensors, blocks.stride, `the block stride`));
    if (blocks.stride !== roundUp(extent, m.alignment))
      throw corrupt(where, `block stride ${blocks.stride} disagrees with the tensors, which need ${roundUp(extent, m.alignment)} bytes per block`);
  }

  // Every stage's byte range: aligned, inside the file, not overlapping another.
  const ranges: { name: string; begin: number; end: number }[] = [];
  for (const b of blocks.entries) ranges.push({ name: `block ${b.index}`, begin: b.offset, end: b.offset + blocks.stride });
  for (const s of m.stages) {
    checkTensors(where, s.tensors, s.length, `stage '${s.name}'`);
    ranges.push({ name: `stage '${s.name}'`, begin: s.offset, end: s.offset + s.length });
    if (s.after >= depth) throw corrupt(where, `stage '${s.name}' runs after block ${s.after}, past the last (depth ${depth})`);
  }
  for (const r of ranges) {
    if (r.begin % m.alignment !== 0) throw corrupt(where, `${r.name} starts at ${r.begin}, not a multiple of ${m.alignment}`);
    if (r.end > fileBytes) throw corrupt(where, `${r.name} (bytes ${r.begin}..${r.end}) is past the end of ${weightsPath} (${fileBytes} bytes)`);
  }
  ranges.sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < ranges.length; i++)
    if (ranges[i]!.begin < ranges[i - 1]!.end && ranges[i]!.end > ranges[i]!.begin && ranges[i - 1]!.end > ranges[i - 1]!.begin)
      throw corrupt(where, `${ranges[i - 1]!.name} and ${ranges[i]!.name} overlap`);

  const tensors = (base: number, list: PackedTensor[]): TensorSpec[] =>
    list.map((t) => ({ role: t.role, name: t.name, dtype: t.dtype, shape: [...t.shape], file: 0, offset: base + t.offset, length: t.length }));
  const stages: StageSpec[] = [];
  const after = (a: number) => {
    for (const s of m.stages)
      if (s.after === a) stages.push({ name: s.name, kind: s.kind, index: s.index, tensors: tensors(s.offset, s.tensors) });
  };
  after(-1);
  for (let i = 0; i < depth; i++) {
    const b = byIndex.get(i)!;
    stages.push({ name: `block.${i}`, kind: 'block', index: i, tensors: tensors(b.offset, b.tensors) });
    after(i);
  }
  return { family: m.family, source: 'packed', dims: { ...m.dims }, lists: { ...m.lists }, files: [weightsPath], stages };
}
