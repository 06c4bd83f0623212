// Three `tessera worker` processes on one queue of a real redis-server, 60 jobs of which 3 are bad
// images: `enqueue --wait` exits 1 listing the bad ones with their codes; every good job is
// completed exactly once (worker logs, manifest, queue counts) with an output equal to
// tower.encode bit for bit and a return value whose sha256 is the file's; every bad one failed
// once, at once (no retry); queue-status reports the counts and each worker's counters; SIGTERM
// ends idle workers with exit 0.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BAD_IMAGES, expectOutputsEqualEncode, HAVE_REDIS, jsonLines, makeImages, MODEL, settledOutcomes, startWorker, tessera, tesseraAsync, useFleet } from './helpers/fleet.js';

describe.skipIf(!HAVE_REDIS)('fleet: 3 workers, 60 jobs, 3 bad images', () => {
  const fleet = useFleet('workers');

  it('does every good job once, fails every bad one once with its code, and reports per-worker counters', async () => {
    const images = join(fleet.tmp, 'images');
    const out = join(fleet.tmp, 'out');
    const good = await makeImages(images, 57);
    const q = ['--redis', fleet.redis.url, '--queue', 'pages'];
    fleet.workers = await Promise.all([0, 1, 2].map(() => startWorker(fleet.redis.url, 'pages', out)));

    const run = tesseraAsync(['enqueue', images, ...q, '--wait', '--progress-interval', '1']);
    const r = await run.done;
    expect(r.stdout).toMatch(/^enqueued 60 new jobs on pages/m);
    expect(r.code, r.stderr).toBe(1);
    for (const [rel, code] of Object.entries(BAD_IMAGES)) expect(r.stdout).toContain(`failed ${join(images, rel)} ${code}: `);
    expect(r.stdout).toMatch(/done: 57 of 60 completed, 3 failed/);
    expect(r.stderr).toMatch(/done \d+\/60, failed \d+, [\d.]+ images\/s, ETA /);

    const { completed, failed } = await settledOutcomes(fleet.workers, 60);
    expect(completed.size).toBe(57);
    for (const img of good) expect(completed.get(img)?.length, img).toBe(1);
    for (const [rel, code] of Object.entries(BAD_IMAGES)) {
      const f = failed.get(join(images, rel));
      expect(f?.length, rel).toBe(1);
      expect(f![0]!.code).toBe(code);
      // Failed at once: no retried attempt of a bad image in any log.
      expect(fleet.workers.flatMap((w) => w.lines).filter((l) => l.input === join(images, rel))).toHaveLength(1);
    }
    // The work was shared (each worker took some) and each job's sha256 is its file's.
    for (const w of fleet.workers) expect(w.lines.some((l) => l.event === 'completed')).toBe(true);
    for (const [, [line]] of completed) expect(createHash('sha256').update(readFileSync(line!.output!)).digest('hex')).toBe(line!.sha256);

    await expectOutputsEqualEncode(images, out, good);
    // And the files are `tessera encode --out-dir`'s, byte for byte.
    const single = join(fleet.tmp, 'single');
    expect((await tessera(['encode', images, '--model', MODEL, '--out-dir', single])).code).toBe(1);
    for (const img of good) {
      const rel = relative(images, img).replace(/\.png$/, '.safetensors');
      expect(readFileSync(join(out, rel)).equals(readFileSync(join(single, rel))), rel).toBe(true);
    }

    const s = await tessera(['queue-status', ...q, '--json']);
    expect(s.code, s.stderr).toBe(0);
    const status = JSON.parse(s.stdout) as { counts: Record<string, number>; failures: Record<string, number>; workers: { name: string; jobs: number }[]; connectedWorkers: number };
    expect(status.counts).toMatchObject({ completed: 57, failed: 3, waiting: 0, active: 0 });
    expect(status.failures).toEqual({ ERR_IMAGE_DECODE: 2, ERR_IMAGE_ASPECT: 1 });
    expect(status.workers).toHaveLength(3);
    expect(status.workers.reduce((a, w) => a + w.jobs, 0)).toBe(57);
    expect(status.connectedWorkers).toBeGreaterThanOrEqual(3);
    const text = await tessera(['queue-status', ...q]);
    expect(text.stdout).toMatch(/completed 57, failed 3/);
    expect(text.stdout).toMatch(/ERR_IMAGE_DECODE 2/);

    // Idle workers stop at SIGTERM with exit 0, their counters in the last line.
    for (const w of fleet.workers) w.proc.kill('SIGTERM');
    for (const w of fleet.workers) {
      expect(await w.exited).toEqual({ code: 0, signal: null });
      const last = w.lines.at(-1)!;
      expect(last).toMatchObject({ type: 'worker', event: 'stopped' });
      expect(last['jobs']).toBe(w.lines.filter((l) => l.event === 'completed').length);
    }

    // The manifest (complete once the workers have closed): a line per job, once each.
    const manifest = jsonLines(readFileSync(join(out, 'manifest.jsonl'), 'utf8'));
    expect(manifest).toHaveLength(60);
    expect(manifest.filter((m) => m['status'] === 'encoded')).toHaveLength(57);
    expect(new Set(manifest.map((m) => m['input'])).size).toBe(60);
    expect(manifest.filter((m) => m['status'] === 'failed').map((m) => (m['error'] as { code: string }).code).sort()).toEqual(Object.values(BAD_IMAGES).sort());
  });
});
