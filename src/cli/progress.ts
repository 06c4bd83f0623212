// A one-line progress bar on stderr for a TTY: images done of the total, the rate (images encoded
// per second of this run; images skipped as up to date count as done but not in the rate), the
// ETA from that rate, and the block being encoded. Rows and messages printed meanwhile go
// through `above()`, which clears the bar first and redraws it after.
import type { CliIo } from './io.js';

/**
 * Whether a bar is drawn on stderr: a terminal that can take one (not TERM=dumb, the terminal of
 * Emacs' shells and of some CI runners), and not a CI job (CI set, as GitHub Actions, GitLab and
 * most others set it), whose logs keep every redraw.
 */
export function drawsProgress(isTTY: boolean, env: Record<string, string | undefined>): boolean {
  return isTTY && env['TERM'] !== 'dumb' && !env['CI'];
}

/** "m:ss" or "h:mm:ss". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

export class ProgressBar {
  #io: CliIo;
  #images: number;
  #done = 0;
  #timed = 0;
  #started: number | undefined;
  #block = 0;
  #blocks = 0;
  #shown = false;
  #last = 0;

  constructor(io: CliIo, images: number) {
    this.#io = io;
    this.#images = images;
  }

  get enabled(): boolean {
    return this.#io.tty;
  }

  /** Block progress of the group in flight (from the tower's onProgress). */
  block(block: number, blocks: number): void {
    this.#started ??= performance.now();
    this.#block = block;
    this.#blocks = blocks;
    // Redraw at most ~20 times a second: a tiny tower reports blocks far faster than that.
    const now = Date.now();
    if (now - this.#last >= 50 || block === blocks) this.#draw(), (this.#last = now);
  }

  /** An image is done: `timed` when it was encoded (or failed) in this run, not skipped. */
  imageDone(timed: boolean): void {
    this.#done++;
    if (timed) this.#timed++;
    this.#draw();
  }

  /** Images per second of this run so far (encoded or failed here, not skipped), or undefined before the first. */
  rate(): number | undefined {
    if (this.#started === undefined || this.#timed === 0) return undefined;
    const s = (performance.now() - this.#started) / 1000;
    return s > 0 ? this.#timed / s : undefined;
  }

  /** Prints a line above the bar. */
  above(print: () => void): void {
    this.clear();
    print();
    if (this.#done < this.#images) this.#draw();
  }

  clear(): void {
    if (this.enabled && this.#shown) this.#io.progress('\r\x1b[2K'), (this.#shown = false);
  }

  #draw(): void {
    if (!this.enabled) return;
    const frac = this.#images ? Math.min(1, this.#done / this.#images) : 1;
    const rate = this.rate();
    const eta = rate ? `, ETA ${formatDuration((this.#images - this.#done) / rate)}` : '';
    const label =
      ` ${this.#done}/${this.#images} images${rate ? `, ${rate.toFixed(rate < 10 ? 2 : 1)} images/s${eta}` : ''}` +
      (this.#blocks ? `, block ${this.#block}/${this.#blocks}` : '');
    const width = Math.max(10, Math.min(40, this.#io.columns - label.length - 3));
    const filled = Math.min(width, Math.round(frac * width));
    this.#io.progress(`\r\x1b[2K[${'='.repeat(filled)}${' '.repeat(width - filled)}]${label}`);
    this.#shown = true;
  }
}
