// Where a command writes: injected so that the commands are testable in-process and the entry
// point (main.ts) binds them to the real streams.
import { drawsProgress } from './progress.js';
export interface CliIo {
  /** A line of results (stdout). */
  out(line: string): void;
  /** A line of diagnostics (stderr). */
  err(line: string): void;
  /** Raw progress output (stderr, no newline); only called when `tty` is true. */
  progress(text: string): void;
  /** stderr is a terminal that takes a progress bar (drawsProgress): draw one. */
  tty: boolean;
  /** Columns of that terminal (for the bar). */
  columns: number;
  /** Aborted on SIGINT / SIGTERM: encode stops between blocks and removes its partial output. */
  signal?: AbortSignal;
  /** Where `encode -` reads its list of paths. */
  stdin?: AsyncIterable<string | Buffer>;
}

export function processIo(): CliIo {
  const interrupt = new AbortController();
  const stop = () => {
    // A second signal ends the process at once.
    if (interrupt.signal.aborted) process.exit(EXIT_INTERRUPTED);
    interrupt.abort();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  // The reader of stdout went away (`tessera inspect m | head`): stop writing and stop the work,
  // as SIGPIPE would, instead of dying on an unhandled EPIPE.
  let stdoutClosed = false;
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    stdoutClosed = true;
    if (!interrupt.signal.aborted) interrupt.abort();
  });
  return {
    signal: interrupt.signal,
    stdin: process.stdin,
    out: (l) => {
      if (!stdoutClosed) process.stdout.write(l + '\n');
    },
    err: (l) => process.stderr.write(l + '\n'),
    progress: (t) => process.stderr.write(t),
    tty: drawsProgress(Boolean(process.stderr.isTTY), process.env),
    columns: process.stderr.columns || 80,
  };
}

/** Exit codes of docs/design.md#command-line. */
export const EXIT_OK = 0;
export const EXIT_SOME_FAILED = 1;
export const EXIT_USAGE = 2;
/** Interrupted by SIGINT / SIGTERM (the shell's 128 + SIGINT). */
export const EXIT_INTERRUPTED = 130;

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) (v /= 1024), u++;
  return `${v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

/** Left-aligned text columns, right-aligned numbers: one string per row. */
export function table(header: string[], rows: string[][], numeric: boolean[]): string[] {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (r: string[]) =>
    r.map((cell, c) => (numeric[c] ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd();
  return [line(header), ...rows.map(line)];
}
