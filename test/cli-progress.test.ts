// The progress line of `tessera encode` on a terminal: images done of the total, images per second of
// this run (skipped images count as done, not in the rate), an ETA from that rate, the block in flight.
import { describe, expect, it } from 'vitest';
import { ProgressBar, formatDuration } from '../src/cli/progress.js';
import type { CliIo } from '../src/cli/io.js';

function fakeIo() {
  const drawn: string[] = [];
  const io: CliIo = { out: () => undefined, err: () => undefined, progress: (t) => drawn.push(t), tty: true, columns: 120 };
  return { io, drawn, last: () => drawn.filter((d) => d.includes('images')).pop() ?? '' };
}

describe('progress line', () => {
  it('shows images/s and an ETA once an image is encoded; skipped images are done but not in the rate', async () => {
    const { io, last } = fakeIo();
    const bar = new ProgressBar(io, 10);
    bar.imageDone(false); // up to date, skipped
    expect(last()).toMatch(/1\/10 images$/);
    bar.block(1, 6);
    await new Promise((r) => setTimeout(r, 30));
    bar.imageDone(true);
    bar.imageDone(true);
    const line = last();
    expect(line).toMatch(/3\/10 images, [\d.]+ images\/s, ETA \d+:\d\d, block 1\/6/);
    // 2 encoded over the elapsed time; 7 left at that rate.
    const rate = bar.rate()!;
    expect(rate).toBeGreaterThan(0);
    const [, m, s] = /ETA (\d+):(\d\d)/.exec(line)!;
    expect(Math.abs(Number(m) * 60 + Number(s) - 7 / rate)).toBeLessThanOrEqual(1);
  });

  it('never draws when stderr is not a terminal', () => {
    const { io, drawn } = fakeIo();
    const bar = new ProgressBar({ ...io, tty: false }, 3);
    bar.block(1, 2);
    bar.imageDone(true);
    expect(drawn).toEqual([]);
  });

  it('formats durations as m:ss or h:mm:ss', () => {
    expect(formatDuration(0)).toBe('0:00');
    expect(formatDuration(61.4)).toBe('1:01');
    expect(formatDuration(3 * 3600 + 5 * 60 + 9)).toBe('3:05:09');
  });
});
