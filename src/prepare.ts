// Image → tower input: the preprocessor a tower uses (its family's, made from its preprocessor_config.json,
// parsed once), and the one shape every family's inputs take on their way to the addon. How many
// tokens a number of patch rows makes is the tower's rule (the addon's sizing), passed in.
import { TesseraError } from './errors.js';
import { familyOf } from './families/registry.js';
import { readImageHeader, type ImageInput } from './image/index.js';
import type { PreprocessOptions } from './options.js';
import type { Family } from './spec/types.js';

export type { PreprocessOptions };


export interface Prepared {
  pixelValues: Float32Array;
  /** Grid-input families (Qwen): the patch grid (t = 1). */
  grid?: { t: number; h: number; w: number };
  /** Position-input families (Gemma 4): (x, y) per patch row. */
  positions?: Int32Array;
  /** Patch rows, and embedding rows the tower will return for them. */
  patches: number;
  tokens: number;
  decoded: { width: number; height: number };
  resized: { width: number; height: number };
  timings: { decodeMs: number; preprocessMs: number };
}

export interface Plan {
  resized: { width: number; height: number };
  grid?: { t: number; h: number; w: number };
  patches: number;
  tokens: number;
}

export interface Preprocessor {
  /** Sizes for an upright image of this size, no pixels touched. */
  plan(size: { width: number; height: number }, opts: PreprocessOptions): Plan;
  run(input: ImageInput, opts: PreprocessOptions): Promise<Prepared>;
}

/**
 * The preprocessor of a tower of `family` (its registry entry's): `dims` are the tower's (TowerSpec.dims),
 * checked against the preprocessor's patch geometry; `tokensOf`: the tower's output rows for that many
 * patch rows (the addon's sizing). Checking a config alone (dims only) needs no tokensOf until plan or run
 * is called.
 */
export function makePreprocessor(
  family: Family,
  config: Record<string, unknown> | undefined,
  where: string,
  dims: Record<string, number> = {},
  tokensOf: (patches: number) => number = () => {
    throw new TesseraError('ERR_INTERNAL', `${where}: a preprocessor made without the tower's sizing cannot count tokens`);
  },
): Preprocessor {
  return familyOf(family).images.preprocessor(config, where, dims, tokensOf);
}

/** An image's upright size from its header alone (EXIF orientation applied), for estimates. */
export async function headerSize(input: ImageInput, maxInputPixels?: number): Promise<{ width: number; height: number }> {
  const h = await readImageHeader(input, maxInputPixels === undefined ? {} : { maxInputPixels });
  return { width: h.width, height: h.height };
}
