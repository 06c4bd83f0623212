// What the tools' C++ builds share (tools/mslemu, tools/fakemetal, tools/cross): staleness by
// modification time, and a pool that runs compiler jobs n at a time.
import { spawn } from 'node:child_process';
import fs from 'node:fs';

export const mtime = (p) => { try { return fs.statSync(p).mtimeMs; } catch { return -1; } };
/** True when `out` is missing or older than any of `ins`. */
export const stale = (out, ins) => mtime(out) < 0 || Math.max(...ins.map(mtime)) > mtime(out);

/**
 * Runs jobs ({ cmd, args, what, done? }) n at a time; `done` runs after a job succeeds. Every
 * failure is collected and thrown together. With `log`, a successful job's output (warnings) is
 * passed to it.
 */
export async function pool(jobs, n, log) {
  const errors = [];
  let next = 0;
  async function worker() {
    while (next < jobs.length) {
      const j = jobs[next++];
      const r = await new Promise((res) => {
        const p = spawn(j.cmd, j.args, { stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        p.stdout.on('data', (d) => { out += d; });
        p.stderr.on('data', (d) => { out += d; });
        p.on('close', (code) => res({ code, out }));
        p.on('error', (e) => res({ code: -1, out: String(e) }));
      });
      if (r.code !== 0) errors.push(`${j.what}:\n${r.out}`);
      else {
        j.done?.();
        if (log && r.out.trim()) log(`${j.what}:\n${r.out.trimEnd()}`);
      }
    }
  }
  await Promise.all(Array.from({ length: Math.max(1, n) }, worker));
  if (errors.length) throw new Error(errors.join('\n'));
}
