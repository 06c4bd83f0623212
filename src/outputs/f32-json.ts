// JSON numbers for float32 values: each value printed as the shortest decimal that reads back
// (as a double, then rounded to float32, which is what the engines do with it: json.loads, then
// torch.tensor(..., dtype=float32)) to the same float32. JavaScript's own Number-to-string gives
// the shortest decimal for the double, which for a float32 held in a double takes up to 17
// significant digits; no float32 needs more than 9, and most embedding values need 7 to 9.
// Whole numbers keep a ".0" so that Python's json reads every value as a float (a list of ints
// would make an int64 tensor).
import { TesseraError } from '../errors.js';

/** Most significant digits any float32 needs to round-trip (FLT_DECIMAL_DIG). */
const F32_MAX_DIGITS = 9;

/** Where the search for the shortest precision starts: embedding values mostly need 7 or 8 digits. */
const F32_TYPICAL_DIGITS = 7;

/** Powers of ten a double holds exactly: scaling by them rounds once, as parsing the decimal does. */
const POW10 = Array.from({ length: 23 }, (_, i) => 10 ** i);

/** Decimal exponents whose p-digit scaling stays within POW10 (embedding values lie far inside). */
const FAST_EXPONENTS = 22 - F32_MAX_DIGITS;

/** Whether the decimal m x 10^-k reads back to the float32 a (one rounding, as parsing it does). */
function readsBack(a: number, m: number, k: number): boolean {
  return Math.fround(k >= 0 ? m / POW10[k]! : m * POW10[-k]!) === a;
}

/**
 * A p-significant-digit integer m such that m x 10^(e10 - p + 1) reads back to the float32 a > 0, or
 * -1 when none does. The candidates are the two p-digit decimals around a (the nearer first): the
 * decimals that read back to a form an interval around it, lopsided at powers of two, so the
 * farther one can be in it when the nearer is not.
 */
function digitsAt(a: number, p: number, e10: number): number {
  const k = p - 1 - e10;
  const scaled = k >= 0 ? a * POW10[k]! : a / POW10[-k]!;
  const lo = Math.floor(scaled);
  if (scaled - lo <= 0.5) {
    if (readsBack(a, lo, k)) return lo;
    if (readsBack(a, lo + 1, k)) return lo + 1;
  } else {
    if (readsBack(a, lo + 1, k)) return lo + 1;
    if (readsBack(a, lo, k)) return lo;
  }
  return -1;
}

/** The decimal m x 10^(e10 - p + 1), in JavaScript's notation (an exponent below 1e-6 and from 1e21). */
function decimalText(negative: boolean, m: number, p: number, e10: number): string {
  let zeros = 0;
  while (m % 10 === 0) {
    m /= 10;
    zeros++;
  }
  const digits = String(m);
  const exponent = e10 + digits.length + zeros - p; // of the first digit (m may have rounded up to 10^p)
  let text: string;
  if (exponent <= -7 || exponent >= 21) text = digits[0] + (digits.length > 1 ? '.' + digits.slice(1) : '') + (exponent < 0 ? 'e-' : 'e+') + Math.abs(exponent);
  else if (exponent < 0) text = '0.' + '0'.repeat(-exponent - 1) + digits;
  else if (digits.length <= exponent + 1) text = digits + '0'.repeat(exponent + 1 - digits.length) + '.0';
  else text = digits.slice(0, exponent + 1) + '.' + digits.slice(exponent + 1);
  return negative ? '-' + text : text;
}

/** v printed with p significant digits when that reads back to the float32 v, else undefined. */
function roundTrips(v: number, p: number): string | undefined {
  const text = v.toPrecision(p);
  return Math.fround(Number(text)) === v ? text : undefined;
}

/** The shortest decimal text that reads back to the float32 `v` (v must be a float32 value). */
export function f32ToJson(v: number): string {
  if (!Number.isFinite(v)) throw new TesseraError('ERR_NUMERIC', `${v} has no JSON number (NaN and infinities are not JSON)`);
  if (v === 0) return Object.is(v, -0) ? '-0.0' : '0.0';
  // Fewer digits round-trip less often, never more often (numbers of p digits are numbers of
  // p + 1 digits too), so the shortest precision is the first that works going up, or the last
  // that works going down, from the typical one: two tries for most values.
  const a = Math.abs(v);
  let e10 = Math.floor(Math.log10(a));
  if (Math.abs(e10) <= FAST_EXPONENTS) {
    // log10 can be one off near powers of ten; the exact powers settle it.
    if (e10 >= 0 ? a < POW10[e10]! : a * POW10[-e10]! < 1) e10--;
    else if (e10 + 1 >= 0 ? a >= POW10[e10 + 1]! : a * POW10[-e10 - 1]! >= 1) e10++;
    let p = F32_TYPICAL_DIGITS;
    let m = digitsAt(a, p, e10);
    if (m >= 0) {
      for (let shorter = 0; p > 1 && (shorter = digitsAt(a, p - 1, e10)) >= 0; p--) m = shorter;
    } else {
      while (m < 0 && p < F32_MAX_DIGITS) m = digitsAt(a, ++p, e10);
    }
    if (m >= 0) return decimalText(v < 0, m, p, e10);
  }
  // Far outside embedding magnitudes (below 1e-13 or from 1e14): the same search on toPrecision.
  for (let p = 1; p <= F32_MAX_DIGITS; p++) {
    const text = roundTrips(v, p);
    if (text !== undefined) return /[.e]/.test(text) ? text : text + '.0';
  }
  return String(v);
}

/** A row of float32 values as a JSON array (joined, not concatenated: many times faster in V8). */
export function f32RowJson(row: Float32Array): string {
  const texts = new Array<string>(row.length);
  for (let i = 0; i < row.length; i++) texts[i] = f32ToJson(row[i]!);
  return '[' + texts.join(',') + ']';
}
