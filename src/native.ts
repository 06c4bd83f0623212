// Loads the addon (a prebuilt binary from prebuilds/ or a source build in build/) and describes its surface. The addon is
// N-API only and context-aware, so this works in worker_threads and Electron.
import type { Precision } from './options.js';
import { createRequire } from 'node:module';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { TesseraError } from './errors.js';
import { packageRoot } from './package-root.js';
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
  stats(): { bytesRead: number; residentBytes: number; reads: number; violations: number; packedWeights: number; residency: string; backend: string; precision: Precision };
  close(): void;
}

export interface NativeOpenOptions {
  backend: string;
  residency: string;
  threads?: number;
  slots?: number;
  precision?: Precision;
}

export interface Addon {
  openTower(spec: TowerSpec, options: NativeOpenOptions): Promise<NativeTower>;
  simdLevel: string;
  /** Every error code native code reports (native/common/error.h), for the cross-check against ERROR_CODES. */
  errorCodes: string[];
  /** How the AVX2 kernels widen bf16 weights, 'unpack' or 'shift' (native/common/cpu_features.h). */
  bf16Widening: string;
  /** The bf16 GEMM precision 'bf16' runs on: 'amx', 'avx512-bf16', 'neon-bf16' or 'none' (native/common/cpu_features.h). */
  bf16Level: string;
  /** The precisions the addon opens a tower with (native/addon/tower_core.h kPrecisions): PRECISIONS. */
  precisions: string[];
  /** Element-wise dtype conversion with common/dtype.h's rounding (tessera pack --dtype). */
  convertDtype(src: Uint8Array, from: string, to: string): Uint8Array;
  /** The weights file's stage and tensor alignments (native/io/weight_alignment.h). */
  weightAlignment: { stage: number; tensor: number };
  /** What each residency holds of the weights (native/io/weight_store_factory.h). */
  weightMemory(spec: TowerSpec, slots: number): { resident: number; slot: number; stream: number; fileBytes: number; mapped: number };
  [binding: string]: unknown;
}

let cached: Addon | undefined;

type NodeGypBuild = ((dir: string) => unknown) & { path(dir: string): string };

/**
 * The addon, loaded once through node-gyp-build: a source build in build/Release (a clone, or a
 * platform without a prebuilt binary) wins, else prebuilds/<platform>-<arch>/ (docs/packaging.md). A
 * missing or unloadable addon is ERR_BACKEND_UNAVAILABLE with the fix in the message.
 */
export function addon(): Addon {
  if (cached) return cached;
  const root = packageRoot();
  const require = createRequire(import.meta.url);
  const load = require('node-gyp-build') as NodeGypBuild;
  let found: string;
  try {
    found = load.path(root);
  } catch {
    throw new TesseraError('ERR_BACKEND_UNAVAILABLE', missingAddon(root));
  }
  try {
    cached = require(found) as Addon;
  } catch (e) {
    throw new TesseraError(
      'ERR_BACKEND_UNAVAILABLE',
      `the native addon ${found} does not load on this machine (${(e as Error).message.split('\n')[0]}): ` +
        'run `npm rebuild tessera-vision` to build it from source (needs a C++20 compiler, make and Python 3)',
    );
  }
  return cached;
}

function missingAddon(root: string): string {
  let prebuilt: string[] = [];
  try {
    prebuilt = readdirSync(join(root, 'prebuilds')).sort();
  } catch {
    // no prebuilds/ folder: a clone that has not run npm install
  }
  const here = `${process.platform}-${process.arch}`;
  const which = prebuilt.length ? `prebuilt binaries exist for ${prebuilt.join(', ')}` : 'this copy has no prebuilt binaries';
  return `the native addon is missing: no source build in ${join(root, 'build', 'Release')} and no prebuilt binary for ${here} ` +
    `(${which}). Run \`npm rebuild tessera-vision\` to build it from source (needs a C++20 compiler, make and Python 3)`;
}
