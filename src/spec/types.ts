// The TowerSpec: the single description of a tower (docs/design.md#the-towerspec), built from config files or GGUF
// metadata by a family's builder (src/families/<family>/), validated with zod, and passed to the
// addon as a plain object (native/io/tower_spec.h is its C++ twin). Dimensions are read from here
// by native code, never from a model-specific default.
import type { Family } from '../families/registry.js';

/** The model families tessera runs: every id of the family registry (src/families/registry.ts). */
export type { Family };
/** The element types tessera computes with (and converts weights to: `tessera pack --dtype`). */
export const COMPUTE_DTYPES = ['f32', 'f16', 'bf16'] as const;
export type ComputeDType = (typeof COMPUTE_DTYPES)[number];
/**
 * The element types of tower weights tessera reads: the computed ones, and q8_0 (ggml's
 * block_q8_0), which the native weight stores widen to f32 as they read it. native/common/dtype.h
 * is the C++ twin.
 */
export const DTYPES = [...COMPUTE_DTYPES, 'q8_0'] as const;
export type DType = (typeof DTYPES)[number];

/** Where a tower was loaded from: tower.info.source. */
export type SourceKind = 'hf-folder' | 'gguf-llama.cpp' | 'gguf-ollama' | 'packed';

export interface TensorSpec {
  /** What the model calls it, e.g. "attn.qkv.weight" (see the family's builder). */
  role: string;
  /** What the file calls it, for messages. */
  name: string;
  dtype: DType;
  shape: number[];
  /** Index into TowerSpec.files. */
  file: number;
  /** Absolute byte offset of the data in that file, and its length in bytes. */
  offset: number;
  length: number;
  /**
   * An assembled tensor (a file that stores in several tensors what the model computes as one, e.g.
   * llama.cpp's attn_q, attn_k and attn_v of a fused qkv): its stored bytes are these byte ranges of
   * its file, read one after the other (src/spec/tensors.ts's assembledTensor states which); `offset`
   * is the first's, `length` their total. Absent for a tensor stored in one piece.
   */
  pieces?: { offset: number; length: number }[];
}

/** What a stage is: the patch embedding, a block, and the stages after blocks (each family its own). */
export const STAGE_KINDS = ['embed', 'block', 'deepstack', 'merger', 'pooler', 'projector'] as const;
export type StageKind = (typeof STAGE_KINDS)[number];

export interface StageSpec {
  /** "embed", "block.3", "deepstack.0", "merged", "pooled", "projected": also the `stages` key of results. */
  name: string;
  kind: StageKind;
  index: number;
  tensors: TensorSpec[];
}

/** A tower as opened from a path: its spec and the image-processor settings that go with it. */
export interface LoadedModel {
  spec: TowerSpec;
  /** preprocessor_config.json (HF folders, a packed folder's copy), unparsed; none for GGUF files. */
  preprocessorConfig: Record<string, unknown> | undefined;
  path: string;
}

export interface TowerSpec {
  family: Family;
  source: SourceKind;
  /** Numeric dimensions every model reads (hidden, heads, head_dim, ...): see the builders. */
  dims: Record<string, number>;
  /** Lists, e.g. deepstack_indexes. */
  lists: Record<string, number[]>;
  files: string[];
  /** In execution order. */
  stages: StageSpec[];
}
