// Loads the addon built by `npm install` (node-gyp) and describes its surface. The addon is
// N-API only and context-aware, so this works in worker_threads and Electron.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { TesseraError } from './errors.js';
import type { TowerSpec } from './spec/types.js';

export interface NativeEncodeArgs {
  pixels: Float32Array;
  cols: number;
  grids?: Int32Array;
  positions?: Int32Array;
  imageRows?: number[];
  stages?: boolean;
  checkFinite?: boolean;
  cancel?: Int32Array;
  onProgress?: (e: { block: number; blocks: number; ms: number }) => void;
}

/** A stage's output rows: one per patch row (embed, block.N) or one per output token (the rest). */
export type StageRowKind = 'patch' | 'token';

export interface NativeStage {
  name: string;
  kind: StageRowKind;
  rows: number;
  cols: number;
  data: Float32Array;
}

/** What one encode of `patches` patch rows (whole images) takes and gives: VisionModel::sizing. */
export interface NativeSizing {
  /** Values per input (pixel) row. */
  patchWidth: number;
  /** Output rows (embedding tokens). */
  tokens: number;
  /** Values per output row. */
  width: number;
  scratchBytes: number;
  /** The f32 input and output. */
  ioBytes: number;
}

export interface NativeEncodeResult {
  embeddings: Float32Array;
  tokens: number;
  width: number;
  deepstack: Float32Array[];
  stages: NativeStage[];
}

export interface NativeTower {
  encode(args: NativeEncodeArgs): Promise<NativeEncodeResult>;
  sizing(patches: number): NativeSizing;
  /** Values per input (pixel) row. */
  readonly patchWidth: number;
  stats(): { bytesRead: number; residentBytes: number; reads: number; violations: number; packedWeights: number; residency: string; backend: string };
  close(): void;
}

export interface NativeOpenOptions {
  backend: string;
  residency: string;
  threads?: number;
  slots?: number;
}

export interface Addon {
  openTower(spec: TowerSpec, options: NativeOpenOptions): Promise<NativeTower>;
  simdLevel: string;
  /** What each residency holds of the weights (native/io/weight_store_factory.h). */
  /** Element-wise dtype conversion with common/dtype.h's rounding (tessera pack --dtype). */
  convertDtype(src: Uint8Array, from: string, to: string): Uint8Array;
  /** The weights file's stage and tensor alignments (native/io/weight_alignment.h). */
  weightAlignment: { stage: number; tensor: number };
  weightMemory(spec: TowerSpec, slots: number): { resident: number; slot: number; stream: number; fileBytes: number };
  [binding: string]: unknown;
}

let cached: Addon | undefined;

/** The addon, loaded once. A missing build is ERR_BACKEND_UNAVAILABLE with the fix in the message. */
export function addon(): Addon {
  if (cached) return cached;
  const root = fileURLToPath(new URL('..', import.meta.url));
  const candidates = ['build/Release/tessera.node', 'build/Debug/tessera.node'].map((p) => root + p);
  const found = candidates.find((p) => existsSync(p));
  if (!found) {
    throw new TesseraError(
      'ERR_BACKEND_UNAVAILABLE',
      `the native addon is not built (looked for ${candidates.join(', ')}): run npm install`,
    );
  }
  cached = createRequire(import.meta.url)(found) as Addon;
  return cached;
}
