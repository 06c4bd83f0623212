// `tessera pack <model> <outdir> [--dtype f16|bf16|f32]`: writes a tower as a packed folder: one
// weights file in which every stage is contiguous and 16 KiB aligned (tensors 64-byte aligned
// inside it), plus tessera-pack.json. The stream store then reads a stage with one pread. With
// --dtype, matrices (tensors of rank >= 2) are converted by the addon's own conversions; vectors
// (norms, biases, clamp scalars) keep their dtype, as llama.cpp's converters do.
import { mkdir, open, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { TesseraError, toTesseraError } from '../errors.js';
import { elementCount, storedBytes } from '../formats/tensor-index.js';
import { addon } from '../native.js';
import { COMPUTE_DTYPES, type ComputeDType, type DType, type LoadedModel, type StageSpec, type TowerSpec } from '../spec/types.js';
import { recordChecksums } from './checksum.js';
import {
  MANIFEST_FILE,
  PACK_FORMAT,
  PACK_VERSION,
  packAlignment,
  type PackManifest,
  type PackedTensor,
} from './manifest.js';

export const WEIGHTS_FILE = 'weights.bin';

export interface PackOptions {
  dtype?: ComputeDType | undefined;
}

export interface PackResult {
  outDir: string;
  stages: number;
  bytes: number;
}

const roundUp = (n: number, a: number) => Math.ceil(n / a) * a;

function packedDtype(t: { dtype: DType; shape: number[] }, dtype: ComputeDType | undefined): DType {
  return dtype && t.shape.length >= 2 ? dtype : t.dtype;
}

/** Tensor offsets inside a stage (spec order, 64-byte aligned) and the stage's extent. */
function stageTensors(stage: StageSpec, dtype: ComputeDType | undefined): { tensors: PackedTensor[]; extent: number } {
  let at = 0;
  const align = packAlignment().tensor;
  const tensors = stage.tensors.map((t) => {
    const d = packedDtype(t, dtype);
    at = roundUp(at, align);
    const p: PackedTensor = { role: t.role, name: t.name, dtype: d, shape: [...t.shape], offset: at, length: storedBytes(d, elementCount(t.shape))! };
    at += p.length;
    return p;
  });
  return { tensors, extent: at };
}

/** The manifest for `spec` (pure): where each stage goes in the weights file. */
export function planPack(spec: TowerSpec, source: { path: string; dtype: ComputeDType | undefined }, preprocessorConfig: Record<string, unknown> | undefined): PackManifest {
  const laid = spec.stages.map((s) => ({ stage: s, ...stageTensors(s, source.dtype) }));
  const blocks = laid.filter((l) => l.stage.kind === 'block');
  const stageAlign = packAlignment().stage;
  const stride = roundUp(Math.max(0, ...blocks.map((b) => b.extent)), stageAlign);
  const manifest: PackManifest = {
    format: PACK_FORMAT,
    version: PACK_VERSION,
    family: spec.family,
    packedFrom: { source: spec.source, path: source.path, dtype: source.dtype ?? null },
    dims: { ...spec.dims },
    lists: { ...spec.lists },
    preprocessorConfig: preprocessorConfig ?? null,
    weights: WEIGHTS_FILE,
    weightsBytes: 0,
    alignment: stageAlign,
    blocks: { count: blocks.length, stride, entries: [] },
    stages: [],
  };
  let at = 0;
  let lastBlock = -1;
  for (const l of laid) {
    at = roundUp(at, stageAlign);
    if (l.stage.kind === 'block') {
      manifest.blocks.entries.push({ index: l.stage.index, offset: at, tensors: l.tensors });
      at += stride;
      lastBlock = l.stage.index;
    } else {
      manifest.stages.push({ name: l.stage.name, kind: l.stage.kind, index: l.stage.index, after: lastBlock, offset: at, length: l.extent, tensors: l.tensors });
      at += l.extent;
    }
  }
  manifest.weightsBytes = roundUp(at, stageAlign);
  return manifest;
}

/** Packs an opened tower (loadModel: any source tessera opens) into `outDir` (new or empty). */
export async function packModel(model: LoadedModel, outDir: string, options: PackOptions = {}): Promise<PackResult> {
  if (options.dtype !== undefined && !(COMPUTE_DTYPES as readonly string[]).includes(options.dtype))
    throw new TesseraError('ERR_INVALID_ARGUMENT', `--dtype must be one of ${COMPUTE_DTYPES.join(', ')} (got '${options.dtype}')`);
  const out = resolve(outDir);
  // Output problems (not a folder, not empty, no permission, disk full) are the caller's to fix:
  // ERR_INVALID_ARGUMENT naming the path, and nothing half-written is left behind.
  const outputError = (what: string, e: unknown) =>
    e instanceof TesseraError ? e : new TesseraError('ERR_INVALID_ARGUMENT', `cannot ${what} ${out}: ${(e as Error).message}`, { cause: e });
  let existing: string[] | undefined;
  try {
    existing = await readdir(out);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw outputError('use', e);
  }
  if (existing?.length) throw new TesseraError('ERR_INVALID_ARGUMENT', `${out} exists and is not empty: pack writes a new folder`);
  try {
    await mkdir(out, { recursive: true });
  } catch (e) {
    throw outputError('create', e);
  }
  const manifest = planPack(model.spec, { path: resolve(model.path), dtype: options.dtype }, model.preprocessorConfig);
  const lib = addon();
  const partial = join(out, WEIGHTS_FILE + '.partial');
  const sources = await Promise.all(model.spec.files.map((f) => open(f, 'r')));
  try {
    const dst = await open(partial, 'w').catch((e: unknown) => {
      throw outputError('write to', e);
    });
    try {
      const place = new Map<string, { base: number; tensors: PackedTensor[] }>();
      for (const b of manifest.blocks.entries) place.set(`block.${b.index}`, { base: b.offset, tensors: b.tensors });
      for (const s of manifest.stages) place.set(s.name, { base: s.offset, tensors: s.tensors });
      for (const stage of model.spec.stages) {
        const { base, tensors: targets } = place.get(stage.name)!;
        for (const [i, t] of stage.tensors.entries()) {
          const target = targets[i]!;
          let bytes: Uint8Array = Buffer.alloc(t.length);
          // An assembled tensor's stored bytes are its pieces back to back (spec/types.ts).
          let at = 0;
          for (const p of t.pieces ?? [{ offset: t.offset, length: t.length }]) {
            const { bytesRead } = await sources[t.file]!.read(bytes, at, p.length, p.offset);
            if (bytesRead !== p.length)
              throw new TesseraError('ERR_WEIGHTS_CORRUPT', `${model.spec.files[t.file]}: short read of tensor '${t.name}' at bytes ${p.offset}..${p.offset + p.length}`);
            at += p.length;
          }
          if (target.dtype !== t.dtype) bytes = lib.convertDtype(bytes, t.dtype, target.dtype);
          await dst.write(bytes, 0, bytes.length, base + target.offset).catch((e: unknown) => {
            throw outputError('write to', e);
          });
        }
      }
      await dst.truncate(manifest.weightsBytes); // the tail of the last stage's alignment
      await dst.sync();
    } finally {
      await dst.close();
    }
    const written = await open(partial, 'r');
    try {
      await recordChecksums(manifest, written, partial);
    } finally {
      await written.close();
    }
    await rename(partial, join(out, WEIGHTS_FILE));
    await writeFile(join(out, MANIFEST_FILE), JSON.stringify(manifest, null, 1) + '\n');
  } catch (e) {
    await rm(partial, { force: true });
    throw toTesseraError(e);
  } finally {
    await Promise.all(sources.map((s) => s.close()));
  }
  const size = (await stat(join(out, WEIGHTS_FILE))).size;
  return { outDir: out, stages: model.spec.stages.length, bytes: size };
}

