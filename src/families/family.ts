// What a model family is, for the TypeScript side (docs/design.md#the-family-layer): everything the core asks a
// family, so that no code outside src/families/ tests a family id or a model_type. A family folder exports
// one TowerFamily; src/families/registry.ts lists them, and the core looks a tower's family up there.
import type { z } from 'zod';
import type { GgufHeader } from '../formats/gguf.js';
import type { HfFolder } from '../formats/hf-folder.js';
import type { PixelInput } from '../options.js';
import type { Preprocessor } from '../prepare.js';
import type { TowerSpec } from '../spec/types.js';

/** The family's reading of an HF reference file's input tensors (doctor, tools): encodePixels' input. @internal */
export interface ReferenceInput {
  input: PixelInput;
  /** Patch rows of the input. */
  patches: number;
}

/** @internal */
export interface TowerFamily<Id extends string = string> {
  /** The TowerSpec.family values this family's builder writes (one folder may serve several close towers). */
  readonly ids: readonly Id[];
  /** config.json model_type values it opens: the full model's and the tower's saved on its own. */
  readonly modelTypes: readonly string[];
  /** The family's name in messages ("Qwen", "Gemma 4"). */
  readonly label: string;

  /** An HF folder whose config.json model_type is one of modelTypes → TowerSpec. */
  fromHfFolder(folder: HfFolder): TowerSpec;
  /**
   * GGUF files: whether this header is the family's to read (then `build` owns every refusal), the reader,
   * the llama.cpp projector types (clip.projector_type) it reads, for the message refusing any other, and
   * the processor settings a file implies (as preprocessor_config.json would state them; absent: none).
   */
  readonly gguf?: {
    claims(h: GgufHeader): boolean;
    build(h: GgufHeader): TowerSpec;
    readonly projectors: readonly string[];
    processor?(h: GgufHeader, spec: TowerSpec): Record<string, unknown>;
  };

  readonly images: {
    /**
     * The preprocessor of a tower of this family: `config` is its preprocessor_config.json (undefined when the
     * source has none), checked against the tower's `dims`; `tokensOf` is the tower's own token count.
     */
    preprocessor(
      config: Record<string, unknown> | undefined,
      where: string,
      dims: Record<string, number>,
      tokensOf: (patches: number) => number,
    ): Preprocessor;
    /** True when the processor's class defaults size images without any config (a GGUF file has none). */
    readonly defaultsSuffice: boolean;
    /** The sizing options (zod shape) preprocess, estimate and the encode calls take for this family. */
    readonly sizingKeys: z.ZodRawShape;
    /** `tessera inspect`'s line on how images are sized. */
    describeSizing(spec: TowerSpec, preprocessorConfig: Record<string, unknown> | undefined): string;
  };

  /**
   * encodePixels' input: its schema, what else it must satisfy to fit the tower (ERR_INVALID_ARGUMENT naming
   * the field; the row counts against pixelValues are the core's), and how an HF reference file holds it.
   */
  readonly pixelInput: {
    readonly schema: z.ZodType<PixelInput>;
    check?(input: PixelInput, dims: Record<string, number>): void;
    fromReference(tensor: (name: string) => Uint8Array): ReferenceInput;
  };

  /** Per output format: why this family cannot be written in it (absent: it can). */
  readonly outputs: { readonly vllmRefusal?: string };

  /** The fixture towers `tessera doctor` runs (folders under test/fixtures, one case each). */
  readonly doctorFixtures: readonly { dir: string; family: Id; caseName: string }[];
}
