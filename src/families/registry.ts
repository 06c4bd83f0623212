// The TypeScript family registry (docs/design.md#the-family-layer): every family tessera opens, one line each. The
// core asks here which family a config's model_type or a GGUF file is, and a tower's family (by
// TowerSpec.family) for its preprocessor, options, input schema and outputs; nothing outside src/families/
// tests a family id. Its native twin is native/models/registry.cc (the tower a TowerSpec.family runs).
import { TesseraError } from '../errors.js';
import type { GgufHeader } from '../formats/gguf.js';
import type { Assert, Equals } from '../type-equality.js';
import type { TowerFamily } from './family.js';
import { gemma4 } from './gemma4/index.js';
import { qwen2 } from './qwen2/index.js';
import { qwen3 } from './qwen3/index.js';

/** @internal */
export const REGISTRY = [qwen3, qwen2, gemma4] as const;

/** A TowerSpec.family value: each registered family's ids. @internal */
export type FamilyId = (typeof REGISTRY)[number]['ids'][number];
/**
 * The model families tessera runs: every TowerSpec.family value. Spelled out for the published types (which
 * stand alone, without the registry's inferred types); held equal to the registry's ids below.
 */
export type Family = 'qwen3_5' | 'qwen3_vl' | 'qwen2_vl' | 'qwen2_5_vl' | 'gemma4';
type _FamilyAgrees = Assert<Equals<Family, FamilyId>>;
/** Every TowerSpec.family value, in registry order. */
export const FAMILIES: readonly Family[] = REGISTRY.flatMap((f) => f.ids);

type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;
/** Every family's sizing option keys together: what a call may pass before its tower is known. @internal */
export type AllSizingKeys = UnionToIntersection<(typeof REGISTRY)[number]['images']['sizingKeys']>;
/** @internal */
export const ALL_SIZING_KEYS = Object.assign({}, ...REGISTRY.map((f) => f.images.sizingKeys)) as AllSizingKeys;

const BY_ID = new Map<string, TowerFamily>(REGISTRY.flatMap((f) => f.ids.map((id) => [id, f as TowerFamily] as const)));

/** The family of a TowerSpec.family value (an unknown one is an internal error: specs are built by families). @internal */
export function familyOf(id: string): TowerFamily {
  const f = BY_ID.get(id);
  if (!f) throw new TesseraError('ERR_INTERNAL', `no family '${id}' is registered (known: ${FAMILIES.join(', ')})`);
  return f;
}

/** Every model_type a registered family opens, in registry order. */
export const MODEL_TYPES: readonly string[] = REGISTRY.flatMap((f) => f.modelTypes);

/** The family that opens config.json's model_type, if any. @internal */
export function familyForModelType(modelType: unknown): TowerFamily | undefined {
  return typeof modelType === 'string' ? REGISTRY.find((f) => f.modelTypes.includes(modelType)) : undefined;
}

/** The family that reads this GGUF file, if any. @internal */
export function familyForGguf(h: GgufHeader): TowerFamily | undefined {
  return REGISTRY.find((f) => 'gguf' in f && f.gguf.claims(h));
}

/** Every llama.cpp projector type a registered family reads, in registry order. @internal */
export const GGUF_PROJECTORS: readonly string[] = REGISTRY.flatMap((f) => ('gguf' in f ? f.gguf.projectors : []));

/** The families whose sizing keys include `key`, for a message refusing another family's key. @internal */
export function familiesWithSizingKey(key: string): TowerFamily[] {
  return REGISTRY.filter((f) => Object.hasOwn(f.images.sizingKeys, key));
}
