// tower.info: what a tower is (family, sizes, dtype, bytes per stage kind) and what it holds in
// memory, derived from the TowerSpec and the residency decision; nothing here touches the addon.
import type { Precision } from './options.js';
import type { Residency } from './residency/index.js';
import type { Family, SourceKind, StageSpec, TowerSpec } from './spec/types.js';

export interface TowerInfo {
  family: Family;
  source: SourceKind;
  path: string;
  depth: number;
  hidden: number;
  heads: number;
  headDim: number;
  outHidden: number;
  patchSize: number;
  /** Patches per side of one output token: Qwen's spatial merge (2), Gemma 4's pooling kernel (3). */
  mergeSize: number;
  /** The dtype holding most of the blocks' weight bytes (f16 for an f16 mmproj, whatever its f32 norms and position table). */
  dtype: string;
  bytes: { total: number; perBlock: number; nonBlock: number };
  backend: string;
  residency: string;
  simd: string;
  /** What the linears compute in: 'bf16' only where it was asked for and the CPU has bf16 units (never claimed otherwise). */
  precision: Precision;
  memory: MemoryInfo;
}

/** tower.info.memory: what the weights take under each residency (the stores' own formulas,
 * through the addon), what this tower holds, and the process's measured peak so far. */
export interface MemoryInfo {
  residency: Residency;
  /** Why this residency (an explicit option, TESSERA_RESIDENCY, or the auto policy's reasoning). */
  reason: string;
  slots: number;
  /** Bytes of weights this tower holds itself under its residency (mapped: only quantised tensors widened to f32 and split tensors joined; the page cache holds the rest). */
  weightBytes: number;
  residentBytes: number;
  slotBytes: number;
  streamBytes: number;
  /** What `mapped` holds of its own: its quantised (Q8_0) tensors widened to f32 and its assembled tensors (a GGUF file's split q / k / v, patch kernel) joined; 0 for a float tower stored whole. */
  mappedBytes: number;
  fileBytes: number;
  /** Peak resident set of the process so far (bytes), updated after each encode. */
  peakRss: number;
}

/** Bytes of a stage's weights as stored. */
export function stageBytes(stage: StageSpec): number {
  return stage.tensors.reduce((a, t) => a + t.length, 0);
}

/** Peak resident set of this process so far, in bytes. */
export function peakRss(): number {
  return process.resourceUsage().maxRSS * 1024;
}


export function describe(
  spec: TowerSpec,
  path: string,
  backend: string,
  memory: MemoryInfo,
  simd: string,
  precision: Precision,
): TowerInfo {
  const bytes = spec.stages.map(stageBytes);
  const blockBytes = spec.stages.flatMap((s, i) => (s.kind === 'block' ? [bytes[i]!] : []));
  const total = bytes.reduce((a, b) => a + b, 0);
  // The tower's dtype is the one holding most of the blocks' bytes: the blocks are the bulk of any
  // real tower, while the embed stage's position table stays f32 in llama.cpp's f16 mmprojs (in a
  // tiny tower it outweighs the blocks, and counting tensors the f32 norms and biases always win).
  const dtypes = new Map<string, number>();
  const blocks = spec.stages.some((s) => s.kind === 'block') ? spec.stages.filter((s) => s.kind === 'block') : spec.stages;
  for (const s of blocks) for (const t of s.tensors) dtypes.set(t.dtype, (dtypes.get(t.dtype) ?? 0) + t.length);
  const dtype = [...dtypes.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? 'f32';
  const d = spec.dims;
  return {
    family: spec.family,
    source: spec.source,
    path,
    depth: d['depth']!,
    hidden: d['hidden']!,
    heads: d['heads']!,
    headDim: d['head_dim']!,
    outHidden: d['out_hidden']!,
    patchSize: d['patch_size']!,
    mergeSize: d['merge_size'] ?? d['pooling_kernel'] ?? 1,
    dtype,
    bytes: {
      total,
      perBlock: Math.max(0, ...blockBytes),
      nonBlock: total - blockBytes.reduce((a, b) => a + b, 0),
    },
    backend,
    residency: memory.residency,
    simd,
    precision,
    memory,
  };
}
