// The docs as a reader gets them.
// Every `docs/<page>.md#<anchor>` cited anywhere in the repository (code comments, messages, docs,
// README) and every relative Markdown link with an anchor (`[x](cpu.md#the-gemm)`, `(#a-section)`)
// resolves: the page exists and has a heading whose GitHub anchor is <anchor>. Anchors are made as
// GitHub makes them: lower case, punctuation other than '-' and '_' dropped, spaces to '-', a
// repeated heading numbered -1, -2, ...
// The docs, README and BENCHMARKS.md speak of the project and of named CPUs, never of the machines a
// session happened to run on ("this VM", "the GPU host lent to the project").
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

export function githubSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(page: string): Set<string> {
  let set = anchorCache.get(page);
  if (set) return set;
  set = new Set();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(join(ROOT, page), 'utf8').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const m = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    // Link text stays, the link target goes: [text](url) -> text.
    const base = githubSlug(m[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'));
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    set.add(n ? `${base}-${n}` : base);
  }
  anchorCache.set(page, set);
  return set;
}

const FILES = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && /\.(ts|mjs|js|cc|h|mm|metal|md|json|sh|py|gyp)$/.test(f) && existsSync(join(ROOT, f)));

interface Citation {
  file: string;
  page: string;
  anchor: string;
}

function citations(): Citation[] {
  const out: Citation[] = [];
  for (const file of FILES) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    // docs/<page>.md#<anchor>, from anywhere.
    for (const m of text.matchAll(/(?<![\w/.-])docs\/([\w./-]+\.md)#([\w-]+)/g)) out.push({ file, page: normalize(join('docs', m[1]!)), anchor: m[2]! });
    if (!file.endsWith('.md')) continue;
    // Relative Markdown links with an anchor, resolved from the page that holds them.
    for (const m of text.matchAll(/\]\(([^)\s]*?)#([\w-]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/.test(target) || target.startsWith('docs/')) continue;
      out.push({ file, page: target ? normalize(join(dirname(file), target)) : file, anchor: m[2]! });
    }
  }
  return out;
}

describe('doc anchors', () => {
  it('makes anchors as GitHub does', () => {
    expect(githubSlug('Side by side on an Intel core')).toBe('side-by-side-on-an-intel-core');
    expect(githubSlug('onnxruntime held to AVX2 too')).toBe('onnxruntime-held-to-avx2-too');
    expect(githubSlug('The `stages` option: HF, bit for bit?')).toBe('the-stages-option-hf-bit-for-bit');
  });

  it('finds the citations (code comments and Markdown links alike)', () => {
    const all = citations();
    expect(all.some((c) => c.file.startsWith('src/') && c.page === 'docs/design.md')).toBe(true);
    expect(all.some((c) => c.file.endsWith('.md') && !c.file.startsWith('docs/design'))).toBe(true);
  });

  it('every cited docs anchor resolves', () => {
    const broken = citations()
      .filter((c) => !existsSync(join(ROOT, c.page)) || !anchorsOf(c.page).has(c.anchor))
      .map((c) => `${c.file}: ${c.page}#${c.anchor}`);
    expect([...new Set(broken)]).toEqual([]);
  });
});

describe('machines in the docs', () => {
  it('are named by their CPUs, never as "this VM" or a lent host', () => {
    // BENCHMARKS.md is written by bench/run.mjs from the pieces and their recorded runs (bench/pieces/**).
    const pages = FILES.filter((f) => f.endsWith('.md') || f.startsWith('bench'));
    const found = pages.flatMap((f) =>
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/\bthis VM\b|\bshared VM\b|GPU host|\blent (to|GPU)\b|the machine lent/i.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found).toEqual([]);
  });
});

// A line of a page that logs rather than explains: a figure a page keeps names the CPU it was measured on;
// when and how it was measured, and what was tried and dropped, is a decision record's (docs/decisions/)
// or BENCHMARKS.md's, which the bench writes.
const LOG_LINE = [
  /\b20\d\d-\d\d-\d\d\b/, // a date
  /\b(in |from )?an earlier (run|check|measurement)\b/i,
  /\bat the time of writing\b/i,
  /\bmeasured here\b/i,
  /\bCI machine\b|\bCI's (AMD|EPYC|AVX|machine|host\b)/, // CI's hosts vary
  /\bthis machine (has|is)\b/i,
];
const logs = (line: string): boolean => LOG_LINE.some((re) => re.test(line));

describe('docs pages explain; logs live in decision records', () => {
  it('no page of docs/ (outside docs/decisions/) nor the README dates a measurement or tells of earlier runs', () => {
    const pages = FILES.filter((f) => f === 'README.md' || (f.startsWith('docs/') && f.endsWith('.md') && !f.startsWith('docs/decisions/')));
    expect(pages.length).toBeGreaterThan(10);
    const found = pages.flatMap((f) =>
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (logs(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found).toEqual([]);
  });

  it('the check finds what it looks for', () => {
    // Lines the pages used to hold, and one they hold now.
    for (const line of [
      'measured 2026-11-30 with the same two programs',
      '| 17.0, 17.3 (16.8 in an earlier run) |',
      'At the time of writing the model gives the tower 2.82 s',
      "on CI's AVX2-only EPYC it falls back to f32",
      'Not measured here: this machine has no Mac.',
    ])
      expect(logs(line), line).toBe(true);
    expect(logs("CI's hosts vary and have had no AMX")).toBe(false);
  });
});

describe('issue numbers', () => {
  it('no doc, test, source or tool cites an issue of a tracker that is not in the repository', () => {
    // The case a test covers, or the reason a doc gives, is said in words; the history lives in commits.
    const found = FILES.filter((f) => !f.startsWith('test/fixtures/')).flatMap((f) =>
      readFileSync(join(ROOT, f), 'utf8')
        .split('\n')
        .flatMap((line, i) => (/\bissues? #?\d+\b|\bissue's\b/i.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(found).toEqual([]);
  });
});
