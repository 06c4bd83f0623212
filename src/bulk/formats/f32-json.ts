// JSON numbers for float32 values: each value printed as the shortest decimal that reads back
// (as a double, then rounded to float32, which is what the engines do with it: json.loads, then
// torch.tensor(..., dtype=float32)) to the same float32. JavaScript's own Number-to-string gives
// the shortest decimal for the double, which for a float32 held in a double takes up to 17
// significant digits; no float32 needs more than 9, and most embedding values need 7 to 9.
// Whole numbers keep a ".0" so that Python's json reads every value as a float (a list of ints
// would make an int64 tensor).
import { TesseraError } from '../../errors.js';

/** Most significant digits any float32 needs to round-trip (FLT_DECIMAL_DIG). */
const F32_MAX_DIGITS = 9;

/** The shortest decimal text that reads back to the float32 `v` (v must be a float32 value). */
export function f32ToJson(v: number): string {
  if (!Number.isFinite(v)) throw new TesseraError('ERR_NUMERIC', `${v} has no JSON number (NaN and infinities are not JSON)`);
  if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
  // Fewer digits round-trip less often, never more often (the nearest p-digit decimal is never
  // closer than the nearest (p+1)-digit one), so the shortest precision is found by bisection.
  let lo = 1;
  let hi = F32_MAX_DIGITS;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (Math.fround(Number(v.toPrecision(mid))) === v) hi = mid;
    else lo = mid + 1;
  }
  // toPrecision can print trailing zeros or an exponent ("1.0e+2"); the double nearest that
  // decimal prints, in JavaScript's shortest form, as no more digits and still reads back to v.
  const text = String(Number(v.toPrecision(lo)));
  return /[.e]/.test(text) ? text : text + '.0';
}

/** A row of float32 values as a JSON array. */
export function f32RowJson(row: Float32Array): string {
  let s = '[';
  for (let i = 0; i < row.length; i++) s += (i ? ',' : '') + f32ToJson(row[i]!);
  return s + ']';
}
