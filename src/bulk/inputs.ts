// What `tessera encode` reads: files, folders (recursive), and `-` for a newline-separated list
// on stdin (each line a file or a folder). Folders contribute the files whose extension is an
// image extension (any case); a file named explicitly is taken whatever its name. `--exclude GLOB`
// (picomatch; a pattern without '/' matches a base name, and a matching folder is not entered)
// drops inputs. Order: arguments as given, each folder's files sorted by path (code units, not the
// locale), so a run is the same on every machine; a path given twice is taken once. A name that
// does not exist is refused (ERR_INVALID_ARGUMENT) before any input is read.
// Each input carries its root and its path relative to it: --out-dir mirrors that path.
import { readdir, stat } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import picomatch from 'picomatch';
import { TesseraError } from '../errors.js';
import { ioError } from '../io/io-error.js';
import { imagePathOf } from '../image/decode.js';

/** Extensions of the formats tessera decodes (README, "Decisions worth knowing"). */
export const IMAGE_EXTENSIONS: readonly string[] = ['.jpg', '.jpeg', '.jpe', '.png', '.webp', '.gif', '.tif', '.tiff', '.avif'];

export interface BulkInput {
  /** The path as the run reads it. */
  path: string;
  /** The folder it was found under (a folder argument), else the current folder or its own folder. */
  root: string;
  /** Its path relative to root, '/'-separated: what --out-dir mirrors. */
  rel: string;
}

export interface CollectOptions {
  exclude?: readonly string[];
  /** Where `-` reads its list from. */
  stdin?: AsyncIterable<string | Buffer>;
  cwd?: string;
}

const posix = (p: string) => p.split(sep).join('/');

function isImageName(name: string): boolean {
  const dot = name.lastIndexOf('.');
  return dot > 0 && IMAGE_EXTENSIONS.includes(name.slice(dot).toLowerCase());
}

async function readList(stdin: AsyncIterable<string | Buffer>): Promise<string[]> {
  let text = '';
  for await (const chunk of stdin) text += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
  return text.split('\n').map((l) => l.replace(/\r$/, '')).filter((l) => l.trim().length > 0);
}

/** Every image file under `root`, as '/'-separated paths relative to it, sorted. Symlinked folders are not followed. */
async function walk(root: string, excluded: (rel: string) => boolean): Promise<string[]> {
  const found: string[] = [];
  const visit = async (dir: string, relDir: string) => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (e) {
      throw ioError(dir, 'cannot read folder', e);
    }
    for (const d of entries) {
      const rel = relDir ? `${relDir}/${d.name}` : d.name;
      if (excluded(rel)) continue;
      if (d.isDirectory()) await visit(join(dir, d.name), rel);
      else if ((d.isFile() || d.isSymbolicLink()) && isImageName(d.name)) found.push(rel);
    }
  };
  await visit(root, '');
  return found.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The inputs named by `args`, in run order (see the header). */
export async function collectInputs(args: readonly string[], options: CollectOptions = {}): Promise<BulkInput[]> {
  const cwd = options.cwd ?? process.cwd();
  const patterns = [...(options.exclude ?? [])];
  const matcher = patterns.length ? picomatch(patterns, { dot: true, basename: true }) : undefined;
  const excluded = (rel: string) => matcher?.(rel) ?? false;
  let names: string[] = [];
  for (const a of args) {
    if (a !== '-') names.push(a);
    else if (!options.stdin) throw new TesseraError('ERR_INVALID_ARGUMENT', "'-' reads a list of paths from stdin, but no stdin was given");
    else names = names.concat(await readList(options.stdin));
  }
  const seen = new Set<string>();
  const out: BulkInput[] = [];
  const add = (input: BulkInput) => {
    const key = resolve(cwd, input.path);
    if (seen.has(key)) return;
    seen.add(key);
    out.push(input);
  };
  for (const given of names) {
    // A file: URL names its file; another URL is refused by name (the fleet fetches URLs, encode reads files).
    const name = imagePathOf(given);
    let st;
    try {
      st = await stat(resolve(cwd, name));
    } catch (e) {
      // A name that does not exist is a slip of the command line, refused before any work (as an
      // empty folder is); a file that exists but cannot be read fails in its own place.
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new TesseraError('ERR_INVALID_ARGUMENT', `input ${name} does not exist`, { cause: e });
    }
    if (st?.isDirectory()) {
      for (const rel of await walk(resolve(cwd, name), excluded)) add({ path: join(name, ...rel.split('/')), root: name, rel });
      continue;
    }
    // A file (one that cannot be stat'ed fails in its own place, with its error code).
    const inside = relative(cwd, resolve(cwd, name));
    const rel = !isAbsolute(inside) && !inside.startsWith('..') ? posix(inside) : posix(relative(dirname(resolve(cwd, name)), resolve(cwd, name)));
    const root = !isAbsolute(inside) && !inside.startsWith('..') ? cwd : dirname(resolve(cwd, name));
    if (excluded(rel)) continue;
    add({ path: name, root, rel });
  }
  return out;
}
