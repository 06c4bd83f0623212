// The jobs `tessera enqueue` makes from its arguments: each image with its absolute path (or URL)
// and its output name (its path relative to the input root it came from, without extension, as
// `encode --out-dir` names it).
import { readdir, stat } from 'node:fs/promises';
import { basename, extname, join, relative, resolve } from 'node:path';
import { TesseraError } from '../errors.js';
import { ioError } from '../io/io-error.js';

export interface JobInput {
  input: string;
  output: string;
}

const IMAGE_EXTENSIONS = new Set(['.png', '.jpg', '.jpeg', '.webp', '.gif', '.tif', '.tiff', '.avif', '.bmp', '.heic', '.heif']);
const isUrl = (s: string) => /^https?:\/\//i.test(s);
const withoutExtension = (p: string) => p.slice(0, p.length - extname(p).length);

function urlOutputName(url: string): string {
  const path = decodeURIComponent(new URL(url).pathname).replace(/^\/+/, '');
  return withoutExtension(path) || 'index';
}

async function walk(root: string, dir: string, out: JobInput[]): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch((e) => {
    throw ioError(dir, 'cannot list folder', e, 'ERR_INVALID_ARGUMENT');
  });
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await walk(root, p, out);
    else if (IMAGE_EXTENSIONS.has(extname(e.name).toLowerCase())) out.push({ input: p, output: withoutExtension(relative(root, p)) });
  }
}

export async function listJobInputs(args: readonly string[], stdin: () => Promise<string>): Promise<JobInput[]> {
  const out: JobInput[] = [];
  const add = async (arg: string) => {
    if (isUrl(arg)) return void out.push({ input: arg, output: urlOutputName(arg) });
    const path = resolve(arg);
    const st = await stat(path).catch(() => undefined);
    if (st?.isDirectory()) {
      const found: JobInput[] = [];
      await walk(path, path, found);
      out.push(...found.sort((a, b) => (a.input < b.input ? -1 : a.input > b.input ? 1 : 0)));
    } else out.push({ input: path, output: withoutExtension(basename(path)) });
  };
  for (const arg of args) {
    if (arg === '-') {
      for (const line of (await stdin()).split('\n').map((l) => l.trim()).filter(Boolean)) await add(line);
    } else await add(arg);
  }
  if (out.length === 0 && args.length) throw new TesseraError('ERR_INVALID_ARGUMENT', `no images in ${args.join(' ')}`);
  return out;
}
