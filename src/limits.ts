// Numeric limits the public calls' arguments share, in a module that imports nothing of tessera's, so that
// options.ts (which asks the family registry) and the families (which define their own option keys) both
// read them without importing each other.
import { z } from 'zod';

/** Largest value a grid side or a pixel count may take: it must survive the addon's int32. */
export const MAX_INT32 = 2 ** 31 - 1;

/** A whole, positive, exactly representable number of pixels, bytes or the like. @internal */
export const positiveInt = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** A Float32Array argument (encodePixels' pixelValues). @internal */
export const float32Array = z.custom<Float32Array>((v) => v instanceof Float32Array, 'must be a Float32Array');
