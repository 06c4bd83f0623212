// The `tessera` command, spawned as a user runs it (node dist/cli/main.js; built by tsc first):
// rows, exit codes 0/1/2, --json, --out safetensors (keys and __metadata__ of docs/design.md#command-line, values
// equal to HF's fixtures end to end), the random-weight demo tower, inspect, and usage errors.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES, IMAGES, asFloat32, asInt64Numbers, readSafetensors } from './helpers/images.js';
import { readFileSync } from 'node:fs';
import { relErr } from './helpers/fixtures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAIN = join(ROOT, 'dist', 'cli', 'main.js');
let tmp: string;

beforeAll(() => {
  // The CLI runs from dist/ as installed; compile the current sources first.
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.json')], { stdio: 'inherit' });
  tmp = mkdtempSync(join(tmpdir(), 'tessera-cli-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function tessera(...args: string[]) {
  const r = spawnSync(process.execPath, [MAIN, ...args], { encoding: 'utf8', cwd: ROOT, timeout: 120_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function metadata(path: string): Record<string, string> {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  return (JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as { __metadata__: Record<string, string> }).__metadata__;
}


describe('tessera encode', () => {
  it('without --model runs the demo tower and says its weights are random', () => {
    const r = tessera('encode', IMAGES + 'coffee.png', IMAGES + 'tiny.png');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/RANDOM/);
    expect(r.stdout).toMatch(/RANDOM weights/);
    const rows = r.stdout.split('\n').filter((l) => l.includes('fixtures/images/'));
    expect(rows).toHaveLength(2);
    // The demo caps images at 1 MP; coffee (600x400) stays 608x384 -> grid 1x24x38, 228 tokens.
    expect(rows[0]).toMatch(/600x400\s+1x24x38\s+228\s+\d+/);
    expect(rows[1]).toMatch(/30x20\s+1x14x20\s+70\s+\d+/);
    expect(r.stdout).toMatch(/encoded 2 of 2 images/);
  });

  it('--out with a real checkpoint equals HF end to end; a failed input gives exit 1 and is named by its path', () => {
    const out = join(tmp, 'qwen.safetensors');
    const model = FIXTURES + 'qwen3_5-tiny/model';
    const broken = join(tmp, 'broken.png');
    writeFileSync(broken, 'not an image');
    const r = tessera('encode', IMAGES + 'coffee.png', broken, IMAGES + 'chelsea_exif6.jpg', '--model', model, '--max-pixels', '32768', '--out', out, '--stages', '--batch', '2');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/broken\.png: ERR_IMAGE_DECODE/);
    expect(r.stdout).toMatch(/encoded 2 of 3 images \(1 failed\)/);
    const t = readSafetensors(out);
    for (const [i, name] of [[0, 'coffee'], [2, 'chelsea_exif6']] as const) {
      const ref = readSafetensors(FIXTURES + `qwen3_5-tiny/expected/${name}.safetensors`);
      expect(t[`image.${i}.embeddings`]!.shape).toEqual(ref.merged!.shape);
      expect(relErr(asFloat32(t[`image.${i}.embeddings`]!), asFloat32(ref.merged!))).toBeLessThan(1e-4);
      expect(asInt64Numbers(t[`image.${i}.grid_thw`]!)).toEqual(asInt64Numbers(ref.image_grid_thw!));
      expect(t[`image.${i}.stage.block.2`]!.shape).toEqual(ref['block.2']!.shape);
      expect(relErr(asFloat32(t[`image.${i}.stage.embed`]!), asFloat32(ref.embed!))).toBeLessThan(1e-4);
    }
    expect(Object.keys(t).some((k) => k.startsWith('image.1.'))).toBe(false);
    const meta = metadata(out);
    expect(JSON.parse(meta.inputs!)).toHaveLength(3);
    expect(meta.model).toBe(model);
    expect(meta.family).toBe('qwen3_5');
    expect(meta.tessera_version).toMatch(/^\d+\.\d+\.\d+/);
    expect(JSON.parse(meta.failed!)).toEqual([broken]);
  });

  it('Gemma 4: --max-soft-tokens, positions in the file, --json rows', () => {
    const out = join(tmp, 'gemma.safetensors');
    const r = tessera('encode', IMAGES + 'coffee.png', '--model', FIXTURES + 'gemma4-tiny/model', '--json', '--out', out, '--max-soft-tokens', '70');
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: 'image', index: 0, ok: true, width: 600, height: 400, patches: 540, tokens: 60, embeddingWidth: 96 });
    expect(lines.at(-1)).toMatchObject({ type: 'summary', images: 1, encoded: 1, failed: 0, demo: false });
    const t = readSafetensors(out);
    const ref = readSafetensors(FIXTURES + 'gemma4-tiny/expected/coffee.safetensors');
    expect(asInt64Numbers(t['image.0.positions']!)).toEqual(asInt64Numbers(ref.positions!));
    expect(relErr(asFloat32(t['image.0.embeddings']!), asFloat32(ref.projected!))).toBeLessThan(1e-4);
  });

  it('usage and model errors exit 2', () => {
    const cases: string[][] = [
      ['encode'],
      ['encode', IMAGES + 'tiny.png', '--bogus'],
      ['encode', IMAGES + 'tiny.png', '--max-soft-tokens', '100'],
      ['encode', IMAGES + 'tiny.png', '--batch', '0'],
      ['encode', IMAGES + 'tiny.png', '--backend', 'gpu'],
      ['encode', IMAGES + 'tiny.png', '--precision', 'fp8'],
      ['encode', IMAGES + 'tiny.png', '--model', join(tmp, 'no-such-model')],
      ['encode', IMAGES + 'tiny.png', join(tmp, 'no-such-image.png')],
      ['frobnicate'],
      [],
      ['inspect'],
      ['inspect', join(tmp, 'no-such-model')],
      ['pack'],
    ];
    for (const args of cases) {
      const r = tessera(...args);
      expect(r.code, `tessera ${args.join(' ')}`).toBe(2);
      expect(r.stderr, `tessera ${args.join(' ')}`).toMatch(/usage|ERR_/);
    }
    expect(existsSync(join(tmp, 'no-such-model'))).toBe(false);
  });

  it('the build sets the run bit on the tessera command, so a clone runs it as ./dist/cli/main.js', () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const s of ['build:ts', 'prepare']) expect(scripts[s], s).toMatch(/node scripts\/bin-mode\.mjs$/);
    chmodSync(MAIN, 0o644); // as tsc writes it
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'bin-mode.mjs')]);
    expect(statSync(MAIN).mode & 0o111).toBe(0o111);
    const r = spawnSync(MAIN, ['--version'], { encoding: 'utf8' });
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    expect(r.status).toBe(0);
  });

  it('--precision bf16 encodes (f32 where the CPU has no bf16 units) within bf16 distance of f32', () => {
    const outs = ['f32', 'bf16'].map((p) => {
      const out = join(tmp, `precision-${p}.safetensors`);
      const r = tessera('encode', IMAGES + 'coffee.png', '--model', FIXTURES + 'qwen3_5-tiny/model', '--max-pixels', '32768', '--out', out, '--precision', p);
      expect(r.code, r.stderr).toBe(0);
      return asFloat32(readSafetensors(out)['image.0.embeddings']!);
    });
    expect(relErr(outs[1]!, outs[0]!)).toBeLessThan(1e-2);
  });

  it("--help and --version exit 0; a command's help gives each option's meaning and default, also as tessera help <command>", () => {
    expect(tessera('--help').code).toBe(0);
    const help = tessera('encode', '--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/usage: tessera encode/);
    expect(help.stdout).toMatch(/--batch N\s+images encoded together \(default 4\)/);
    expect(tessera('help', 'encode').stdout).toBe(help.stdout);
    expect(tessera('help', 'frobnicate').code).toBe(2);
    expect(tessera('--version').stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it('an unknown flag gets one clean line with a did-you-mean, and a missing input is a usage error naming it', () => {
    const r = tessera('encode', IMAGES + 'tiny.png', '--max-pixel', '100');
    expect(r.code).toBe(2);
    expect(r.stderr.split('\n')[0]).toBe("tessera encode: unknown option --max-pixel for tessera encode (did you mean --max-pixels?); tessera encode --help lists its options");
    const missing = join(tmp, 'no-such-image.png');
    const m = tessera('encode', IMAGES + 'tiny.png', missing);
    expect(m.code).toBe(2);
    expect(m.stderr).toContain(`input ${missing} does not exist`);
    expect(m.stdout).toBe('');
  });

  it('--json speaks JSON for everything: a usage or model error is one error record on stdout', () => {
    for (const args of [
      ['encode', IMAGES + 'tiny.png', '--json', '--bogus'],
      ['encode', IMAGES + 'tiny.png', '--json', '--batch', '0'],
      ['encode', join(tmp, 'no-such-image.png'), '--json'],
      ['encode', IMAGES + 'tiny.png', '--json', '--model', join(tmp, 'no-such-model')],
      ['inspect', join(tmp, 'no-such-model'), '--json'],
      ['inspect', '--json', '--bogus'],
    ]) {
      const r = tessera(...args);
      expect(r.code, args.join(' ')).toBe(2);
      const lines = r.stdout.trim().split('\n');
      expect(lines, args.join(' ')).toHaveLength(1);
      const rec = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(rec).toMatchObject({ type: 'error', exitCode: 2 });
      expect(rec['code']).toMatch(/^ERR_/);
      expect(r.stderr, args.join(' ')).toBe('');
    }
  });

  it('--quiet prints only failures and the summary line', () => {
    const broken = join(tmp, 'quiet-broken.png');
    writeFileSync(broken, 'not an image');
    const r = tessera('encode', IMAGES + 'tiny.png', broken, '--quiet');
    expect(r.code).toBe(1);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^encoded 1 of 2 images \(1 failed\) in /);
    // The demo's warning stays, on stderr.
    expect(r.stderr).toMatch(/RANDOM/);
    expect(r.stderr).toMatch(/quiet-broken\.png: ERR_IMAGE_DECODE/);
  });
});

describe('tessera inspect', () => {
  it('prints family, shapes, dtypes and bytes; --json is machine-readable', () => {
    const r = tessera('inspect', FIXTURES + 'qwen3_vl-tiny/model');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/family\s+qwen3_vl \(hf-folder\)/);
    expect(r.stdout).toMatch(/4 blocks, hidden 144, 2 heads x 72/);
    expect(r.stdout).toMatch(/block\.0 \(x4, same shapes\)/);
    expect(r.stdout).toMatch(/f16\s+\[432, 144\]/); // qkv of one block
    const j = JSON.parse(tessera('inspect', FIXTURES + 'qwen3_vl-tiny/model', '--json').stdout) as {
      family: string;
      depth: number;
      bytes: { total: number; perBlock: number };
      stages: { name: string; kind: string; bytes: number }[];
    };
    expect(j.family).toBe('qwen3_vl');
    expect(j.depth).toBe(4);
    expect(j.stages.filter((s) => s.kind === 'block')).toHaveLength(4);
    expect(j.stages.reduce((a, s) => a + s.bytes, 0)).toBe(j.bytes.total);
  });

  it("reports an f16 mmproj's dtype as f16: by the blocks' bytes, not by tensor count", () => {
    const gguf = FIXTURES + 'gemma4-tiny/mmproj-gemma4v-f16.gguf';
    const j = JSON.parse(tessera('inspect', gguf, '--json').stdout) as { dtype: string; stages: { kind: string; tensors: { dtype: string }[] }[] };
    // More of its tensors are f32 (norms, biases), and its f32 position table outweighs the tiny blocks.
    const tensors = j.stages.flatMap((s) => s.tensors);
    expect(tensors.filter((t) => t.dtype === 'f32').length).toBeGreaterThan(tensors.filter((t) => t.dtype === 'f16').length);
    expect(j.dtype).toBe('f16');
    expect(tessera('inspect', gguf).stdout).toMatch(/^dtype\s+f16$/m);
  });
});

describe('progress bar', () => {
  it('draws on a TTY, clears before each row, never on a pipe or with --json', async () => {
    const { run } = await import('../src/cli/main.js');
    const make = (tty: boolean) => {
      const log: { kind: string; text: string }[] = [];
      const io = {
        out: (t: string) => log.push({ kind: 'out', text: t }),
        err: (t: string) => log.push({ kind: 'err', text: t }),
        progress: (t: string) => log.push({ kind: 'bar', text: t }),
        tty,
        columns: 80,
      };
      return { io, log };
    };
    const tty = make(true);
    expect(await run(['encode', IMAGES + 'tiny.png', IMAGES + 'coffee.png', '--batch', '1'], tty.io)).toBe(0);
    const bars = tty.log.filter((l) => l.kind === 'bar').map((l) => l.text);
    expect(bars.some((b) => /\[=*\s*\] 1\/2 images/.test(b))).toBe(true);
    expect(bars.some((b) => /block \d+\/\d+/.test(b))).toBe(true);
    // Every result row is preceded by a clear of the bar when one was shown.
    const firstRow = tty.log.findIndex((l) => l.kind === 'out' && l.text.includes('tiny.png'));
    const lastBarBefore = tty.log.slice(0, firstRow).filter((l) => l.kind === 'bar').at(-1);
    expect(lastBarBefore?.text).toBe('\r\x1b[2K');
    for (const l of tty.log.filter((x) => x.kind === 'out')) expect(l.text).not.toMatch(/\x1b/);

    const pipe = make(false);
    expect(await run(['encode', IMAGES + 'tiny.png'], pipe.io)).toBe(0);
    expect(pipe.log.some((l) => l.kind === 'bar')).toBe(false);
    const json = make(true);
    expect(await run(['encode', IMAGES + 'tiny.png', '--json'], json.io)).toBe(0);
    expect(json.log.some((l) => l.kind === 'bar')).toBe(false);
  });
});

describe('interrupting', () => {
  it('an aborted encode exits 130 and leaves no output file behind', async () => {
    const { run } = await import('../src/cli/main.js');
    const out = join(tmp, 'aborted.safetensors');
    const ctl = new AbortController();
    ctl.abort(); // as if SIGINT arrived before the first block
    const lines: string[] = [];
    const io = { out: () => undefined, err: (t: string) => lines.push(t), progress: () => undefined, tty: false, columns: 80, signal: ctl.signal };
    expect(await run(['encode', IMAGES + 'tiny.png', '--out', out], io)).toBe(130);
    expect(lines.join('\n')).toMatch(/interrupted; encoded 0 of 1 image/);
    expect(existsSync(out)).toBe(false);
    // With --json the stream still ends with a summary record.
    const records: string[] = [];
    const jsonIo = { ...io, out: (t: string) => records.push(t) };
    expect(await run(['encode', IMAGES + 'tiny.png', '--out', out, '--json'], jsonIo)).toBe(130);
    expect(JSON.parse(records.at(-1)!)).toMatchObject({ type: 'summary', interrupted: true, images: 1, encoded: 0, notDone: 1 });
    const { readdirSync } = await import('node:fs');
    expect(readdirSync(tmp).filter((f) => f.startsWith('aborted'))).toEqual([]);
  });
});

describe('a closed stdout', () => {
  it('stops quietly when the reader goes away (tessera inspect | head -1), no EPIPE crash', () => {
    const model = join(FIXTURES, 'qwen3_vl-tiny', 'model');
    const r = spawnSync('/bin/sh', ['-c', `"${process.execPath}" "${MAIN}" inspect "${model}" | head -1`], { encoding: 'utf8' });
    expect(r.stdout.trim()).toMatch(/^model\s/);
    expect(r.stderr).not.toMatch(/EPIPE|Unhandled/);
  });
});
