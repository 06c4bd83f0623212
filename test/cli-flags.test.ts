// The flag tables (src/cli/commands.ts) and what is made from them (src/cli/flags.ts): each flag of
// every command is parsed, shown in its usage and (unless marked as detail) in `tessera --help`;
// every flag of a group is a key that group's library schema knows (so a flag cannot drift from
// the option it sets); ints, choices and required flags are checked with the flag's name; a zod
// refusal is reworded with the flag's name.
import { describe, expect, it } from 'vitest';
import { COMMANDS, ENCODE, ENQUEUE, WORKER } from '../src/cli/commands.js';
import { editDistance, flagged, helpOf, intFlag, parseFlags, usageOf, UsageError, type Command, type Flag } from '../src/cli/flags.js';
import { drawsProgress } from '../src/cli/progress.js';
import { summaryText } from '../src/cli/encode.js';
import { USAGE } from '../src/cli/main.js';
import { JobOptionsSchema } from '../src/fleet/job-data.js';
import { BulkOutputOptionsSchema, OpenOptionsSchema, encodeManyOptionsSchema, parseArgument } from '../src/options.js';

/** A value each flag accepts: its first choice, a small int, a path. */
function sample(name: string, f: Flag): string[] {
  if (f.type === 'boolean') return [`--${name}`];
  if (f.choices) return [`--${name}`, String(f.choices[f.choices.length - 1])];
  return [`--${name}`, f.type === 'int' ? String(Math.max(f.min ?? 1, 1)) : `/some/${name}`];
}

const allFlags = (c: Command) => Object.entries(c.flags).flatMap(([n, f]) => sample(n, f));

describe('the flag tables', () => {
  it('every flag is parsed, shown in its usage, and (unless a detail) in tessera --help', () => {
    for (const c of COMMANDS) {
      const args = [...(c.args ? ['x', 'y'].slice(0, c.args.split(' ').length) : []), ...allFlags(c)];
      const parsed = parseFlags(c, args);
      const set = Object.values(parsed.groups).reduce((n, g) => n + Object.keys(g).length, 0);
      expect(set, c.name).toBe(Object.keys(c.flags).length);
      for (const [name, f] of Object.entries(c.flags)) {
        expect(usageOf(c), `${c.name} --${name}`).toContain(`--${name}`);
        if (!f.detail) expect(USAGE, `tessera --help: ${c.name} --${name}`).toMatch(new RegExp(`\\n  ${c.name}\\b[^]*?--${name}\\b`));
      }
    }
    // The flag the old summary lacked.
    expect(USAGE).toContain('--hash-inputs');
  });

  it('every flag of a group is a key of the library schema that checks that group', () => {
    const encode = parseFlags(ENCODE, ['x', ...allFlags(ENCODE)]).groups;
    // Gemma's and Qwen's sizing keys together: the family-free schema takes both.
    expect(() => parseArgument(encodeManyOptionsSchema(), { ...encode['encode'], minPixels: 1, maxPixels: 2 }, 't')).not.toThrow();
    expect(() => parseArgument(OpenOptionsSchema, encode['open'], 't')).not.toThrow();
    const { out: _out, ...bulk } = encode['bulk']!;
    expect(() => parseArgument(BulkOutputOptionsSchema, bulk, 't')).not.toThrow();
    const enqueue = parseFlags(ENQUEUE, ['x', ...allFlags(ENQUEUE)]).groups;
    expect(() => parseArgument(JobOptionsSchema, { ...enqueue['job'], minPixels: 1, maxPixels: 2 }, 't')).not.toThrow();
    const worker = parseFlags(WORKER, allFlags(WORKER)).groups;
    expect(() => parseArgument(OpenOptionsSchema, worker['open'], 't')).not.toThrow();
    expect(Object.keys(worker['worker']!).sort()).toEqual(['lockDurationMs', 'maxStalledCount', 'stalledIntervalMs']);
    expect(worker['fetch']).toEqual({ maxBytes: 1, allowPrivateUrls: true });
  });

  it('refuses malformed ints, unknown choices, missing required flags and unknown flags, naming the flag', () => {
    expect(() => intFlag('batch', '0')).toThrow(/--batch must be a positive integer \(got '0'\)/);
    expect(() => intFlag('threads', '-1', 0)).toThrow(/--threads must be an integer >= 0/);
    expect(() => intFlag('group', '65', 1, 64)).toThrow(/--group must be at most 64 \(got 65\)/);
    expect(intFlag('threads', '0', 0)).toBe(0);
    expect(() => parseFlags(ENCODE, ['x', '--backend', 'gpu'])).toThrow(/--backend must be one of auto, cpu, metal, metal-emulated \(got 'gpu'\)/);
    expect(() => parseFlags(WORKER, ['--queue', 'q'])).toThrow(/--redis is required/);
    expect(() => parseFlags(ENCODE, ['x', '--bogus'])).toThrow(UsageError);
    expect(parseFlags(ENCODE, ['--help']).help).toBe(true);
  });

  it('rewords a library refusal with the flag name', () => {
    const check = () => parseArgument(encodeManyOptionsSchema(), { maxSoftTokens: 100 }, 'tessera encode');
    expect(() => flagged(check, ENCODE)).toThrow(/^--max-soft-tokens must be one of 70, 140, 280, 560, 1120/);
    expect(() => flagged(() => parseArgument(OpenOptionsSchema, { lockDurationMs: 1 }, 'x'), WORKER)).toThrow(/unknown option --lock-duration/);
    // A flag whose option key is not its name is named as the command spells it (--out-dtype sets outputDtype).
    const narrow = { outDir: 'o', format: 'npy', outputDtype: 'bf16' };
    expect(() => flagged(() => parseArgument(BulkOutputOptionsSchema, narrow, 'x'), ENCODE)).toThrow(/^--out-dtype numpy has no bfloat16/);
    expect(() => flagged(() => parseArgument(JobOptionsSchema, { outputDtype: 'f8' }, 'x'), ENQUEUE)).toThrow(/^--out-dtype /);
  });
});

describe('help and slips', () => {
  it("every flag says what it does; a command's help lists each with its default", () => {
    for (const c of COMMANDS) {
      const help = helpOf(c);
      for (const [name, f] of Object.entries(c.flags)) {
        expect(f.help.length, `${c.name} --${name}`).toBeGreaterThan(5);
        expect(help, `${c.name} --${name}`).toContain(`--${name}`);
        expect(help.replace(/\s+/g, ' '), `${c.name} --${name}`).toContain(f.help.split(' ').slice(0, 3).join(' '));
        if (f.default !== undefined) expect(help.replace(/\s+/g, ' ')).toContain(`(default ${f.default})`);
      }
    }
  });

  it('an unknown flag names the nearest one when it is a slip, and none when nothing is near', () => {
    expect(editDistance('max-pixel', 'max-pixels')).toBe(1);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(() => parseFlags(ENCODE, ['x', '--max-pixel', '5'])).toThrow(/unknown option --max-pixel for tessera encode \(did you mean --max-pixels\?\)/);
    expect(() => parseFlags(ENCODE, ['x', '--outdir', 'd'])).toThrow(/did you mean --out-dir\?/);
    expect(() => parseFlags(WORKER, ['--redis=x', '--queue', 'q', '--thread', '2'])).toThrow(/did you mean --threads\?/);
    let message = '';
    try {
      parseFlags(ENCODE, ['x', '--frobnicate']);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toBe('unknown option --frobnicate for tessera encode; tessera encode --help lists its options');
  });

  it('draws a progress bar only on a terminal that takes one, never in CI', () => {
    expect(drawsProgress(true, { TERM: 'xterm-256color' })).toBe(true);
    expect(drawsProgress(false, { TERM: 'xterm-256color' })).toBe(false);
    expect(drawsProgress(true, { TERM: 'dumb' })).toBe(false);
    expect(drawsProgress(true, { TERM: 'xterm', CI: 'true' })).toBe(false);
  });

  it('the summary line counts failures', () => {
    expect(summaryText({ images: 302, encoded: 82, skipped: 218, failed: 2 })).toBe('encoded 82 of 302 images (218 up to date, 2 failed)');
    expect(summaryText({ images: 1, encoded: 1, skipped: 0, failed: 0 })).toBe('encoded 1 of 1 image');
    expect(summaryText({ images: 3, encoded: 2, skipped: 0, failed: 1 })).toBe('encoded 2 of 3 images (1 failed)');
  });
});
