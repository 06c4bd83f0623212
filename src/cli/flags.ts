// Each command's flags, declared once (src/cli/commands.ts), and everything made from that
// declaration: node:util's parseArgs options, the command's usage text, the summary `tessera --help`
// prints, and the conversion of the values into the option objects the library takes, which the
// commands then check with the library's own zod schemas (parseArgument), the refusal worded with
// the flag's name (flagged). Choices are the library's lists (BACKENDS, OUTPUT_FORMATS, ...), never
// copies.
import { parseArgs } from 'node:util';

/** A refusal of the command line: the command prints it with its usage and exits 2. */
export class UsageError extends Error {}

export interface Flag {
  type: 'string' | 'boolean' | 'int';
  /** What the value is, in the usage text: 'PATH', 'N', ... (ints default to N); choices show themselves. */
  value?: string;
  /** The values allowed, from the library's list: shown in the usage text; a word flag's value is checked against them. */
  choices?: readonly (string | number)[];
  /** Smallest and largest value of an int flag (default 1, none). */
  min?: number;
  max?: number;
  multiple?: boolean;
  required?: boolean;
  /** The key in the option object, when it is not the flag's name in camelCase (lock-duration -> lockDurationMs). */
  key?: string;
  /** The group (the option object) it belongs to; default 'cli' (the command's own). */
  group?: string;
  /** Left out of the `tessera --help` summary (it stays in the command's own usage). */
  detail?: boolean;
  /** What the flag does, for `tessera <command> --help`. */
  help: string;
  /** Its default, when it has one worth stating ('4', 'auto', 'the demo tower'). */
  default?: string;
}

export interface Command {
  name: string;
  /** The positional arguments, as the usage text shows them: '<model> <outdir>'. */
  args?: string;
  flags: Record<string, Flag>;
  /** Lines under the usage. */
  notes?: string;
}

/** --max-pixels -> maxPixels. */
const camel = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
/** maxPixels -> --max-pixels. */
const flagName = (key: string) => '--' + key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());

/** The one integer parser of the command line: an integer of digits, from `min` to `max`. */
export function intFlag(name: string, v: string, min = 1, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min)
    throw new UsageError(`--${name} must be ${min === 1 ? 'a positive integer' : `an integer >= ${min}`} (got '${v}')`);
  if (n > max) throw new UsageError(`--${name} must be at most ${max} (got ${n})`);
  return n;
}

function flagText(name: string, f: Flag): string {
  if (f.type === 'boolean') return `--${name}`;
  const value = f.choices ? f.choices.join('|') : (f.value ?? 'N');
  return `--${name} ${value}`;
}

/** The flags of a usage line: the required ones bare, the others in brackets, `...` after a repeatable one. */
function flagsText(c: Command, summary: boolean): string[] {
  return Object.entries(c.flags)
    .filter(([, f]) => !(summary && f.detail))
    .map(([name, f]) => (f.required ? flagText(name, f) : `[${flagText(name, f)}]${f.multiple ? '...' : ''}`));
}

/** Words laid out in lines of at most `width` columns, continuation lines indented by `indent`. */
function wrap(first: string, words: string[], indent: number, width = 110): string {
  const lines: string[] = [];
  let line = first;
  for (const w of words) {
    if (line.length + 1 + w.length > width && line.trim().length) {
      lines.push(line);
      line = ' '.repeat(indent) + w;
    } else line += (line.length ? ' ' : '') + w;
  }
  lines.push(line);
  return lines.join('\n');
}

/** `usage: tessera <name> <args> [flags]...`, then the notes. */
export function usageOf(c: Command): string {
  const head = `usage: tessera ${c.name}${c.args ? ' ' + c.args : ''}`;
  const text = wrap(head, flagsText(c, false), `usage: tessera ${c.name} `.length);
  return c.notes ? `${text}\n${c.notes}` : text;
}

/**
 * `tessera <command> --help`: the usage line, then each option with what it does and its default,
 * then the notes.
 */
export function helpOf(c: Command): string {
  const head = `usage: tessera ${c.name}${c.args ? ' ' + c.args : ''} [options]`;
  const entries: [string, string][] = Object.entries(c.flags).map(([name, f]) => [
    flagText(name, f),
    f.help + (f.required ? ' (required)' : '') + (f.default !== undefined ? ` (default ${f.default})` : '') + (f.multiple ? ' (repeatable)' : ''),
  ]);
  entries.push(['--help, -h', 'this text']);
  const width = Math.min(34, Math.max(...entries.map(([l]) => l.length)));
  const lines = entries.map(([left, text]) => {
    const pad = left.length <= width ? left.padEnd(width) : left + '\n' + ' '.repeat(width + 4);
    return wrap(`  ${pad}  `.trimEnd(), text.split(' '), width + 4);
  });
  return [head, '', 'options:', ...lines, ...(c.notes ? ['', c.notes] : [])].join('\n');
}

/** Levenshtein distance of two words: the did-you-mean of an unknown flag. */
export function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/** The command's flag nearest to an unknown one, when it is near enough to be a slip (at most a third of its letters off). */
export function nearestFlag(c: Command, unknown: string): string | undefined {
  const word = unknown.replace(/^-+/, '').split('=')[0]!;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const name of [...Object.keys(c.flags), 'help']) {
    const d = editDistance(word, name);
    if (d < bestDistance) (best = name), (bestDistance = d);
  }
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(word.length / 3)) ? best : undefined;
}

/** The command's entry in `tessera --help`. */
export function summaryOf(c: Command): string {
  return wrap(`  ${c.name}${c.args ? ' ' + c.args : ''}`, flagsText(c, true), 20);
}

export interface ParsedFlags {
  help: boolean;
  positionals: string[];
  /** The values by group, then by option key; ints converted, absent flags absent. */
  groups: Record<string, Record<string, unknown>>;
}

/** Parses `args` by the command's table: unknown flags, missing required ones and malformed ints are UsageErrors. */
export function parseFlags(c: Command, args: readonly string[]): ParsedFlags {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = { help: { type: 'boolean', short: 'h' } };
  for (const [name, f] of Object.entries(c.flags)) options[name] = { type: f.type === 'boolean' ? 'boolean' : 'string', ...(f.multiple ? { multiple: true } : {}) };
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: [...args], options, strict: true, allowPositionals: c.args !== undefined }));
  } catch (e) {
    // node:util names an unknown flag "Unknown option '--x'" and goes on about '--' and positionals.
    const unknown = /Unknown option '([^']+)'/.exec((e as Error).message)?.[1];
    if (unknown === undefined) throw new UsageError((e as Error).message);
    const near = nearestFlag(c, unknown);
    throw new UsageError(`unknown option ${unknown} for tessera ${c.name}${near ? ` (did you mean --${near}?)` : ''}; tessera ${c.name} --help lists its options`);
  }
  const groups: Record<string, Record<string, unknown>> = {};
  if (values['help']) return { help: true, positionals, groups };
  for (const [name, f] of Object.entries(c.flags)) {
    const group = (groups[f.group ?? 'cli'] ??= {});
    const v = values[name];
    if (v === undefined || v === false) {
      if (f.required) throw new UsageError(`--${name} is required`);
      continue;
    }
    // A word flag's choices are checked here for flags no library schema takes (pack's --dtype); the
    // schemas check the rest again.
    for (const one of Array.isArray(v) ? v : [v])
      if (f.type === 'string' && f.choices && !f.choices.includes(one as string))
        throw new UsageError(`--${name} must be one of ${f.choices.join(', ')} (got '${String(one)}')`);
    group[f.key ?? camel(name)] = f.type === 'int' ? intFlag(name, v as string, f.min, f.max) : v;
  }
  return { help: false, positionals, groups };
}

/**
 * Runs a check of flag values against a library schema (parseArgument's ERR_INVALID_ARGUMENT) and
 * rewords its refusal with the flag's name: "option 'maxPixels' ..." becomes "--max-pixels ...".
 * A flag of `command` whose option key differs from its name (--out-dtype sets outputDtype) is named
 * as the command spells it.
 */
export function flagged<T>(check: () => T, command: Command): T {
  try {
    return check();
  } catch (e) {
    const keys = new Map(Object.entries(command.flags).flatMap(([name, f]) => (f.key ? [[f.key, name] as const] : [])));
    const flag = (k: string) => (keys.has(k) ? `--${keys.get(k)!}` : flagName(k));
    throw new UsageError(
      (e as Error).message
        .replace(/^[^:]+: option '([^']+)'/, (_, k: string) => flag(k))
        .replace(/unknown option '([^']+)'/, (_, k: string) => `unknown option ${flag(k)}`),
    );
  }
}
