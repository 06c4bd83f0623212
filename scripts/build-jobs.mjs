// What the C++ builds outside node-gyp share (tools/mslemu, tools/fakemetal, scripts/native-tests.mjs,
// scripts/prebuild.mjs's arm64 cross build): staleness by
// modification time, a pool that runs compiler jobs n at a time, and a lock so that one build runs at a time.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const mtime = (p) => { try { return fs.statSync(p).mtimeMs; } catch { return -1; } };
/** True when `out` is missing or older than any of `ins`. */
export const stale = (out, ins) => mtime(out) < 0 || Math.max(...ins.map(mtime)) > mtime(out);

/**
 * Every header (.h, .inc) under the given folders that exist: an object older than any of them is rebuilt
 * (simpler than parsing includes, and never misses one).
 */
export function headerFiles(dirs) {
  const out = [];
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory()) walk(p);
      else if (/\.(h|inc)$/.test(e.name)) out.push(p);
    }
  };
  for (const d of dirs) if (fs.existsSync(d)) walk(d);
  return out;
}

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

/**
 * Runs fn holding `dir`/.lock: vitest runs test files in parallel processes, and each may ask for the
 * same build. A lock whose holder is gone (or older than 15 minutes) is taken over.
 */
export async function withLock(dir, fn) {
  fs.mkdirSync(dir, { recursive: true });
  const lock = `${dir}/.lock`;
  const t0 = Date.now();
  for (;;) {
    try {
      fs.writeFileSync(lock, String(process.pid), { flag: 'wx' });
      break;
    } catch {
      let orphaned = false;
      try {
        const pid = Number(fs.readFileSync(lock, 'utf8'));
        process.kill(pid, 0);  // throws when the holder is gone
      } catch {
        orphaned = true;
      }
      if (orphaned || Date.now() - t0 > 15 * 60_000) fs.rmSync(lock, { force: true });
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(lock, { force: true });
  }
}

/** The compiler and flags in one file, rewritten only when they change: another compiler or flag set makes every object stale. */
export function commandStamp(dir, command) {
  const stamp = path.join(dir, 'command.txt');
  const text = command.join(' ') + '\n';
  let old = null;
  try { old = fs.readFileSync(stamp, 'utf8'); } catch { /* first build */ }
  if (old !== text) fs.writeFileSync(stamp, text);
  return stamp;
}

/**
 * Compiles each source (paths relative to `root`) into `out`/obj/ with `cxx` and `flags`, `jobs` at a
 * time, then links the objects into `bin` with `linkArgs`; each step only when its inputs (the source,
 * `deps`, the objects) are newer. Outputs are written under a temporary name and renamed when complete:
 * a killed compile never leaves a file that looks up to date. Returns { compiled, total, linked }.
 */
export async function compileAndLink({ cxx, flags, sources, root, out, deps, bin, linkArgs, jobs, log }) {
  const objs = [];
  const work = [];
  for (const src of sources) {
    const obj = path.join(out, 'obj', src.replace(/\.cc$/, '.o'));
    objs.push(obj);
    if (!stale(obj, [path.join(root, src), ...deps])) continue;
    fs.mkdirSync(path.dirname(obj), { recursive: true });
    work.push({ cmd: cxx, args: [...flags, '-c', path.join(root, src), '-o', `${obj}.tmp`], what: `compile ${src}`, done: () => fs.renameSync(`${obj}.tmp`, obj) });
  }
  log?.(`${cxx}: ${work.length} of ${objs.length} object(s) to compile, ${jobs} at a time`);
  await pool(work, jobs, log);
  const linked = stale(bin, objs);
  if (linked) {
    await pool([{ cmd: cxx, args: ['-o', `${bin}.tmp`, ...objs, ...linkArgs], what: `link ${path.basename(bin)}`, done: () => fs.renameSync(`${bin}.tmp`, bin) }], 1, log);
  }
  return { compiled: work.length, total: objs.length, linked };
}
