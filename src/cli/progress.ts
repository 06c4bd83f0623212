// A one-line progress bar on stderr for a TTY: images done and the block being encoded. Rows and
// messages printed meanwhile go through `above()`, which clears the bar first and redraws it after.
import type { CliIo } from './io.js';

export class ProgressBar {
  #io: CliIo;
  #images: number;
  #done = 0;
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

  /** Block progress of the chunk in flight (from the tower's onProgress). */
  block(block: number, blocks: number): void {
    this.#block = block;
    this.#blocks = blocks;
    // Redraw at most ~20 times a second: a tiny tower reports blocks far faster than that.
    const now = Date.now();
    if (now - this.#last >= 50 || block === blocks) this.#draw(), (this.#last = now);
  }

  imagesDone(n: number): void {
    this.#done = n;
    this.#draw();
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
    const frac = this.#images ? (this.#done + (this.#blocks ? this.#block / this.#blocks : 0)) / this.#images : 1;
    const label = ` ${this.#done}/${this.#images} images${this.#blocks ? `, block ${this.#block}/${this.#blocks}` : ''}`;
    const width = Math.max(10, Math.min(40, this.#io.columns - label.length - 3));
    const filled = Math.min(width, Math.round(frac * width));
    this.#io.progress(`\r\x1b[2K[${'='.repeat(filled)}${' '.repeat(width - filled)}]${label}`);
    this.#shown = true;
  }
}
