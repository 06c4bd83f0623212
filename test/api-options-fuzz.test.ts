// Seeded fuzzing of the public calls' arguments (src/options.ts's schemas and what lies behind
// them): random option objects for open, encode, encodeBatch, preprocess and estimate, random
// pixel inputs for encodePixels, random batch entries. The property is test/helpers/fuzz.ts's (a
// result or a TesseraError with a known code, never another exception, never ERR_INTERNAL, never a
// hang), plus one oracle the schemas owe: an object with a key the call does not know, or a known
// key of the wrong type, is ERR_INVALID_ARGUMENT naming that key.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VisionTower } from '../src/index.js';
import { FIXTURES } from './helpers/fixtures.js';
import { OutcomeTally, Rng, fuzzCases, outcomeOf } from './helpers/fuzz.js';

const QWEN35 = join(FIXTURES, 'qwen3_5-tiny', 'model');
const GEMMA4 = join(FIXTURES, 'gemma4-tiny', 'model');
const TINY = join(FIXTURES, 'images', 'tiny.png'); // 30 x 20: every admitted size is cheap to encode

// Values for any key: every JS type, and numbers on the schemas' boundaries. Pixel bounds stay
// small enough that an accepted call encodes in milliseconds.
const aborted = AbortSignal.abort();
const VALUES: unknown[] = [
  undefined, null, true, false, 0, -1, 1, 2, 1.5, Number.NaN, Infinity, -Infinity, 2 ** 31, 2 ** 53, 1e12,
  16, 70, 140, 280, 1120, 300, 1024, 16384, 65536, 131072, '', 'yes', 'cpu', 'auto', 'stream', 'mapped', 'resident',
  'metal', 'cloud', [], [1], {}, { t: 1 }, () => undefined, aborted, new AbortController().signal, 10n, Symbol('s'),
  new Float32Array(2), Buffer.from('x'),
];
const OPEN_KEYS = ['backend', 'residency', 'slots', 'memoryBudget', 'threads', 'verify'];
const ENCODE_KEYS = ['minPixels', 'maxPixels', 'maxSoftTokens', 'maxInputPixels', 'stages', 'signal', 'onProgress', 'checkFinite'];
const STRANGERS = ['minPixel', 'maxpixels', 'stage', 'Signal', 'budget', 'toString', '__proto__', 'constructor', 'x'];

/** The type each known key must have (undefined is always allowed: an absent option). */
const TYPE_OF: Record<string, string> = {
  backend: 'string', residency: 'string', slots: 'number', memoryBudget: 'number', threads: 'number', verify: 'boolean',
  minPixels: 'number', maxPixels: 'number', maxSoftTokens: 'number', maxInputPixels: 'number', stages: 'boolean',
  signal: 'object', onProgress: 'function', checkFinite: 'boolean',
};

function randomOptions(rng: Rng, known: readonly string[]): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  const n = rng.int(4);
  for (let i = 0; i < n; i++) {
    const key = rng.chance(0.85) ? rng.pick(known) : rng.pick(STRANGERS);
    // Mostly values of the right type, so the checks behind the type checks are reached too.
    const typed = VALUES.filter((v) => typeof v === TYPE_OF[key] && v !== null);
    Object.defineProperty(o, key, { value: rng.chance(0.7) && typed.length ? rng.pick(typed) : rng.pick(VALUES), enumerable: true, writable: true, configurable: true });
  }
  return o;
}

/** The keys that must make the call refuse (unknown ones, known ones of the wrong type): one of them is named. */
function mustRefuse(o: Record<string, unknown>, known: readonly string[]): string[] {
  return Object.entries(o)
    .filter(([k, v]) => !known.includes(k) || (v !== undefined && (typeof v !== TYPE_OF[k] || v === null)))
    .map(([k]) => k);
}

let qwen: VisionTower;
let gemma: VisionTower;
beforeAll(async () => {
  qwen = await VisionTower.open(QWEN35, { backend: 'cpu' });
  gemma = await VisionTower.open(GEMMA4, { backend: 'cpu' });
});
afterAll(async () => {
  await qwen?.close();
  await gemma?.close();
});

async function check(
  what: string,
  call: () => Promise<unknown>,
  options: Record<string, unknown>,
  known: readonly string[],
  tally: OutcomeTally,
): Promise<void> {
  const refuseFor = mustRefuse(options, known);
  const o = await outcomeOf(what, call);
  tally.add(o);
  if (refuseFor.length) {
    expect(o.ok, `${what}: accepted although ${refuseFor.join(', ')} is unknown or of the wrong type`).toBe(false);
    if (!o.ok) {
      expect(o.error.code, what).toBe('ERR_INVALID_ARGUMENT');
      // The key named is one the object has; unknown keys are reported before bad values.
      const named = /option '([^']+)'/.exec(o.error.message)?.[1];
      expect(named, `${what}: ${o.error.message} names no option`).toBeDefined();
      expect(options, what).toHaveProperty([named!]);
      const unknown = refuseFor.filter((k) => !(k in TYPE_OF) || !known.includes(k));
      if (unknown.length) expect(unknown, `${what}: ${o.error.message}`).toContain(named);
    }
  }
}

describe('option schemas fuzz', () => {
  it('VisionTower.open: 120 random option objects', async () => {
    const rng = new Rng(0x09e4);
    const tally = new OutcomeTally();
    for (let i = 0; i < fuzzCases(120); i++) {
      const o = randomOptions(rng, OPEN_KEYS);
      // A few threads at most: a valid open with threads 1024 would start 1024 threads.
      if (typeof o['threads'] === 'number' && o['threads'] > 4) o['threads'] = 2;
      await check(`open seed 0x09e4 case ${i}`, async () => {
        const t = await VisionTower.open(QWEN35, o);
        await t.close();
      }, o, OPEN_KEYS, tally);
    }
    expect(tally.get('ERR_INVALID_ARGUMENT'), String(tally)).toBeGreaterThan(30);
    expect(tally.get('ok'), String(tally)).toBeGreaterThan(5);
  });

  for (const [family, seed] of [['qwen3_5', 0xe4c0], ['gemma4', 0xe4c1]] as const) {
    it(`${family}: encode, preprocess and estimate with 150 random option objects each`, async () => {
      const tower = family === 'gemma4' ? gemma : qwen;
      const known = ENCODE_KEYS.filter((k) => (family === 'gemma4' ? !k.endsWith('Pixels') || k === 'maxInputPixels' : k !== 'maxSoftTokens'));
      const sizing = known.filter((k) => !['stages', 'signal', 'onProgress', 'checkFinite'].includes(k));
      const rng = new Rng(seed);
      const tally = new OutcomeTally();
      for (let i = 0; i < fuzzCases(150); i++) {
        const all = randomOptions(rng, ENCODE_KEYS);
        const what = `${family} seed 0x${seed.toString(16)} case ${i}`;
        await check(`${what} encode`, () => tower.encode(TINY, all), all, known, tally);
        const pre = randomOptions(rng, sizing);
        await check(`${what} preprocess`, () => tower.preprocess(TINY, pre), pre, sizing, tally);
        await check(`${what} estimate`, () => tower.estimate({ width: 1 + rng.int(4000), height: 1 + rng.int(4000) }, pre), pre, sizing, tally);
      }
      expect(tally.get('ERR_INVALID_ARGUMENT'), String(tally)).toBeGreaterThan(100);
      expect(tally.get('ok'), String(tally)).toBeGreaterThan(30);
    });
  }

  it('encodePixels: 200 random inputs (pixel arrays, grids, positions) on both families', async () => {
    const rng = new Rng(0x919e1);
    const tally = new OutcomeTally();
    const side = () => rng.pick([0, 1, 2, 3, 4, -2, 1.5, 2 ** 32 + 1, Number.NaN, '2', null]);
    const grid = (): unknown =>
      rng.pick([
        () => ({ t: side(), h: side(), w: side() }),
        () => ({ t: 1, h: 2 * (1 + rng.int(3)), w: 2 * (1 + rng.int(3)) }),
        () => [side(), side(), side()],
        () => [{ t: 1, h: 2, w: 2 }, { t: 1, h: 2, w: 4 }],
        () => ({ t: 1, h: 2, w: 2, d: 1 }),
        () => rng.pick(VALUES),
      ])();
    for (let i = 0; i < fuzzCases(200); i++) {
      const gemmaCase = i % 2 === 1;
      const tower = gemmaCase ? gemma : qwen;
      const cols = gemmaCase ? 768 : 1536;
      const rows = rng.pick([0, 1, 4, 8, 9, 16]);
      const pixelValues = rng.chance(0.85) ? new Float32Array(rows * cols + (rng.chance(0.1) ? 1 : 0)).map(() => rng.next() - 0.5) : rng.pick(VALUES);
      const input: Record<string, unknown> = { pixelValues };
      if (gemmaCase) {
        input['positions'] = rng.chance(0.8) ? Int32Array.from({ length: 2 * rows }, () => rng.pick([0, 1, 2, -1, 2 ** 30])) : rng.pick(VALUES);
        if (rng.chance(0.3)) input['imageRows'] = rng.pick([[rows], [1, rows - 1], [], [0], 'x']);
      } else input['grid'] = grid();
      if (rng.chance(0.1)) input[rng.pick(STRANGERS)] = 1;
      const options = rng.chance(0.3) ? randomOptions(rng, ['stages', 'checkFinite']) : {};
      await check(`encodePixels seed 0x919e1 case ${i}`, () => tower.encodePixels(input as never, options), {}, [], tally);
    }
    expect(tally.get('ERR_INVALID_ARGUMENT'), String(tally)).toBeGreaterThan(100);
  });

  it('encodeBatch: 60 random lists; bad entries fail in their own slot, the good ones are encoded', async () => {
    const rng = new Rng(0xba7c4);
    const MISSING = join(FIXTURES, 'images', 'no-such.png');
    const entries: unknown[] = [TINY, TINY, MISSING, '/dev/zero', '', 42, null, undefined, {}, [], Buffer.from('no image'), new Uint8Array(0), new Float32Array(4)];
    for (let i = 0; i < fuzzCases(60); i++) {
      const list = Array.from({ length: rng.int(6) }, () => rng.pick(entries));
      const o = await outcomeOf(`encodeBatch seed 0xba7c4 case ${i}`, () => qwen.encodeBatch(list as never));
      expect(o.ok, `case ${i}: the call itself must not fail for bad entries`).toBe(true);
      const results = (o as { value: unknown[] }).value;
      expect(results).toHaveLength(list.length);
      list.forEach((entry, k) => {
        const r = results[k] as { tokens?: number; code?: string };
        if (entry === TINY) expect(r.tokens, `case ${i} slot ${k}`).toBe(20); // 30 x 20 -> 128 x 128 (min pixels): 64 patches, 16 tokens
        else if (entry === MISSING) expect(r.code, `case ${i} slot ${k}`).toBe('ERR_IO'); // the file is not there (ENOENT), not undecodable
        else expect(r.code, `case ${i} slot ${k}`).toMatch(/^ERR_(INVALID_ARGUMENT|IMAGE_DECODE)$/);
      });
    }
  });
});
