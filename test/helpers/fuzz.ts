// Shared by the fuzz and hostile-input tests: a seeded PRNG (a failure reproduces from its seed and
// case number), byte mutations (flips, truncations, splices, inserted runs, boundary values), and
// the property every case is held to: it succeeds, or it fails with a TesseraError of a known code,
// within a time bound (a hang is a failure, not a slow test).
import { ERROR_CODES, TesseraError } from '../../src/errors.js';

/**
 * Cases per fuzz test: `n` in CI (a fixed budget, the same cases every run), times
 * TESSERA_FUZZ_SCALE for a longer local hunt (the first n cases stay the same).
 */
export function fuzzCases(n: number): number {
  const scale = Number(process.env['TESSERA_FUZZ_SCALE'] ?? 1);
  return Math.max(1, Math.round(n * (Number.isFinite(scale) && scale > 0 ? scale : 1)));
}

/** mulberry32: small, fast, and good enough to choose mutations. */
export class Rng {
  #s: number;
  constructor(readonly seed: number) {
    this.#s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

// Values that sit on boundaries parsers get wrong: zero, all ones, sign bits, small counts.
const BOUNDARY_BYTES = [0x00, 0xff, 0x7f, 0x80, 0x01, 0x20, 0x22, 0x5b, 0x7b, 0x7d];
const BOUNDARY_U32 = [0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 2, 8, 16, 255, 65536];

export type Mutation = 'flip' | 'byte' | 'truncate' | 'splice' | 'insert' | 'u32' | 'duplicate';
export const MUTATIONS: readonly Mutation[] = ['flip', 'byte', 'truncate', 'splice', 'insert', 'u32', 'duplicate'];

/**
 * One mutant of `src` (never `src` itself): `rounds` mutations drawn from `kinds`, each confined
 * to [from, src.length) when `from` is given (so a header can be mutated while its magic stays).
 */
export function mutate(src: Uint8Array, rng: Rng, opts: { rounds?: number; kinds?: readonly Mutation[]; from?: number } = {}): Buffer {
  let b = Buffer.from(src);
  const from = Math.min(opts.from ?? 0, b.length);
  const rounds = opts.rounds ?? 1 + rng.int(4);
  const at = () => from + rng.int(Math.max(1, b.length - from));
  for (let r = 0; r < rounds; r++) {
    switch (rng.pick(opts.kinds ?? MUTATIONS)) {
      case 'flip': {
        const i = at();
        if (i < b.length) b[i]! ^= 1 << rng.int(8);
        break;
      }
      case 'byte': {
        const i = at();
        if (i < b.length) b[i] = rng.chance(0.5) ? rng.pick(BOUNDARY_BYTES) : rng.int(256);
        break;
      }
      case 'truncate':
        b = b.subarray(0, at());
        break;
      case 'splice': {
        // A range of the file copied over another place of it: plausible bytes in the wrong spot.
        const len = 1 + rng.int(64);
        const s = rng.int(Math.max(1, b.length - len));
        b = Buffer.concat([b.subarray(0, at()), b.subarray(s, s + len), b.subarray(Math.min(b.length, at() + len))]);
        break;
      }
      case 'insert': {
        const i = at();
        b = Buffer.concat([b.subarray(0, i), Buffer.alloc(1 + rng.int(16), rng.pick(BOUNDARY_BYTES)), b.subarray(i)]);
        break;
      }
      case 'u32': {
        const i = at();
        if (i + 4 <= b.length) b.writeUInt32LE(rng.pick(BOUNDARY_U32), i);
        break;
      }
      case 'duplicate': {
        const i = at();
        const len = 1 + rng.int(32);
        b = Buffer.concat([b.subarray(0, i + len), b.subarray(i, i + len), b.subarray(i + len)]);
        break;
      }
    }
  }
  return b;
}

/** Text mutations for JSON: the byte mutations plus edits that keep it mostly JSON. */
export function mutateJsonText(text: string, rng: Rng): string {
  const edits = [
    () => text.replace(/-?\d+(\.\d+)?/, () => rng.pick(['-1', '0', '1e308', '1.5', '4294967297', '"7"', 'null', '[]', '9007199254740993'])),
    () => text.replace(/"[a-z_]+":/, (k) => `${k}${rng.pick(['null,', '{},', '[[[[[[1]]]]]],', '"x",'])}${k}`),
    () => text.replace(/(true|false)/, rng.pick(['"yes"', '0', 'null'])),
    () => text.replace(/\[[^\[\]]*\]/, rng.pick(['[]', '[1]', '"[]"', '{}', '[-1,-1,-1]'])),
    () => text.slice(0, rng.int(text.length)),
    () => mutate(Buffer.from(text), rng).toString('utf8'),
  ];
  return rng.pick(edits)();
}

export type Outcome = { ok: true; value: unknown } | { ok: false; error: TesseraError };

/**
 * Runs `fn` and holds it to the property: a value, or a TesseraError whose code is one of
 * ERROR_CODES (never ERR_INTERNAL: that is a bug, not bad input), within `timeoutMs`. Anything
 * else (another exception type, a hang) throws, naming `what`, so the test fails on that case.
 */
export async function outcomeOf(what: string, fn: () => unknown, timeoutMs = 10_000): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no outcome within ${timeoutMs} ms (a hang)`)), timeoutMs);
  });
  try {
    const value = await Promise.race([Promise.resolve().then(fn), hang]);
    return { ok: true, value };
  } catch (e) {
    if (!(e instanceof TesseraError)) throw new Error(`${what}: threw ${e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e)}, not a TesseraError`, { cause: e });
    if (!(ERROR_CODES as readonly string[]).includes(e.code) || e.code === 'ERR_INTERNAL')
      throw new Error(`${what}: TesseraError with code ${e.code}: ${e.message}`, { cause: e });
    return { ok: false, error: e };
  } finally {
    clearTimeout(timer);
  }
}

/** `fn` must fail: the TesseraError it fails with (see outcomeOf for what else fails the test). */
export async function refusalOf(what: string, fn: () => unknown, timeoutMs = 10_000): Promise<TesseraError> {
  const o = await outcomeOf(what, fn, timeoutMs);
  if (o.ok) throw new Error(`${what}: succeeded, expected a TesseraError`);
  return o.error;
}

/** Counts outcomes by code ('ok' for successes), so a fuzz test can show it reached the error paths. */
export class OutcomeTally {
  readonly counts = new Map<string, number>();
  add(o: Outcome): void {
    const k = o.ok ? 'ok' : o.error.code;
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }
  get(k: string): number {
    return this.counts.get(k) ?? 0;
  }
  toString(): string {
    return [...this.counts].map(([k, v]) => `${k} ${v}`).join(', ');
  }
  get refused(): number {
    let n = 0;
    for (const [k, v] of this.counts) if (k !== 'ok') n += v;
    return n;
  }
}
