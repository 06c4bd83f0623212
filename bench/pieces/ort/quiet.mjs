// Timing on a shared machine: a run records the CPU time
// that OTHER processes used meanwhile (system busy time from /proc/stat minus this process's own
// CPU time, all its threads) as a share of all cores x wall time. Before a timed run the bench waits
// for the machine to be quiet (two 300 ms windows under QUIET), for at most a bounded time; a run
// with more than REJECT foreign load is rejected and repeated (a bounded number of attempts).
// Where /proc/stat is missing (macOS), nothing is measured and every run is kept.
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';

export const QUIET = 0.05, REJECT = 0.10;
const CORES = cpus().length;
const HAVE_PROC = existsSync('/proc/stat');

function busyMs() { // user+nice+system+irq+softirq over all CPUs, in ms (USER_HZ = 100)
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6]) * 10;
}
const ownMs = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };

/** Runs fn; returns its result, wall ms, own CPU ms and the foreign load (0..1 of all cores). */
export async function measureForeign(fn) {
  const b0 = HAVE_PROC ? busyMs() : 0, o0 = ownMs(), t0 = performance.now();
  const r = await fn();
  const wall = performance.now() - t0, own = ownMs() - o0;
  const foreign = HAVE_PROC ? Math.max(0, (busyMs() - b0 - own) / (CORES * wall)) : 0;
  return { r, wall, own, foreign };
}

/** Waits until two consecutive 300 ms windows have < QUIET foreign load; returns ms waited, or -1 after maxMs. */
export async function waitQuiet(maxMs) {
  if (!HAVE_PROC) return 0;
  const t0 = performance.now();
  let ok = 0;
  while (performance.now() - t0 < maxMs) {
    const { foreign } = await measureForeign(() => new Promise((res) => setTimeout(res, 300)));
    ok = foreign < QUIET ? ok + 1 : 0;
    if (ok >= 2) return performance.now() - t0;
  }
  return -1;
}

/** The foreign load right now, over one second (for the report when the machine is busy). */
export async function foreignNow() {
  if (!HAVE_PROC) return 0;
  return (await measureForeign(() => new Promise((res) => setTimeout(res, 1000)))).foreign;
}
