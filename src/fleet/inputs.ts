// The jobs `tessera enqueue` makes from its arguments: files, folders and `-` (a list on stdin) are
// collected exactly as `tessera encode` collects them (src/bulk/inputs.ts), so each job's rel is
// the path `encode --out-dir` would write; http(s) URLs (as arguments or lines of the list) are
// jobs as they are; a URL of any other scheme (file:, data:, ftp:, ...) is refused (url-policy.ts).
// Paths become absolute: a worker on another machine reads them from the same
// mount.
import { resolve } from 'node:path';
import { collectInputs } from '../bulk/index.js';
import { defaultRel } from './job-output.js';
import { checkInputScheme, isHttpUrl } from './url-policy.js';

export interface JobInput {
  input: string;
  rel: string;
}

export async function listJobInputs(args: readonly string[], readStdin: () => Promise<string>, exclude: readonly string[] = []): Promise<JobInput[]> {
  const names: string[] = [];
  for (const a of args) {
    if (a !== '-') names.push(a);
    else names.push(...(await readStdin()).split('\n').map((l) => l.replace(/\r$/, '')).filter((l) => l.trim().length > 0));
  }
  for (const n of names) checkInputScheme(n);
  const out: JobInput[] = [];
  // Runs of paths go to collectInputs together (it drops a path given twice); URLs keep their place.
  for (let i = 0; i < names.length; ) {
    if (isHttpUrl(names[i]!)) {
      out.push({ input: names[i]!, rel: defaultRel(names[i]!) });
      i++;
      continue;
    }
    let j = i;
    while (j < names.length && !isHttpUrl(names[j]!)) j++;
    for (const b of await collectInputs(names.slice(i, j), { exclude })) out.push({ input: resolve(b.path), rel: b.rel });
    i = j;
  }
  return out;
}
