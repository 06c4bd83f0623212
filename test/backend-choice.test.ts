// backend 'auto' (src/backend-choice.ts): Metal on Apple silicon with the CPU behind it. A GPU the kernels cannot
// use refuses with ERR_BACKEND_UNAVAILABLE (native/metal/capability.h; the refusal itself runs through device.mm
// on fake Metal in test/metal-objc.test.ts); 'auto' then warns in one line and opens on the next candidate,
// and reports which backend it opened. The real open on this platform: 'auto' is the CPU, and info.backend says so.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { backendCandidates, openFirstAvailable } from '../src/backend-choice.js';
import { TesseraError, VisionTower } from '../src/index.js';
import { FIXTURES } from './helpers/fixtures.js';

const paravirtual = "backend 'metal': the GPU 'Apple Paravirtual device' (family Apple5) cannot run tessera's kernels: it lacks GPU family Apple7";

describe('backend auto', () => {
  it('candidates: Metal then the CPU on Apple silicon, the CPU elsewhere; an explicit backend alone', () => {
    expect(backendCandidates('auto', 'darwin', 'arm64')).toEqual(['metal', 'cpu']);
    expect(backendCandidates('auto', 'darwin', 'x64')).toEqual(['cpu']);
    expect(backendCandidates('auto', 'linux', 'x64')).toEqual(['cpu']);
    expect(backendCandidates('metal', 'darwin', 'arm64')).toEqual(['metal']);
    expect(backendCandidates('metal-emulated', 'linux', 'x64')).toEqual(['metal-emulated']);
    expect(() => backendCandidates('metal', 'linux', 'x64')).toThrow(/needs macOS on Apple Silicon/);
  });

  it('a refused GPU: one warning line naming it, then the CPU, which is reported', async () => {
    const warnings: string[] = [];
    const tried: string[] = [];
    const r = await openFirstAvailable(['metal', 'cpu'], async (b) => {
      tried.push(b);
      if (b === 'metal') throw new TesseraError('ERR_BACKEND_UNAVAILABLE', paravirtual);
      return `opened on ${b}`;
    }, (l) => warnings.push(l));
    expect(tried).toEqual(['metal', 'cpu']);
    expect(r).toEqual({ value: 'opened on cpu', backend: 'cpu' });
    expect(warnings).toEqual([`tessera: backend 'auto': metal is unavailable (${paravirtual}); running on cpu`]);
    expect(warnings[0]).not.toContain('\n');
  });

  it('other errors, and the last candidate\'s refusal, are thrown as they are; nothing is said', async () => {
    const warnings: string[] = [];
    const bad = new TesseraError('ERR_MODEL_FORMAT', 'broken');
    await expect(openFirstAvailable(['metal', 'cpu'], async () => { throw bad; }, (l) => warnings.push(l))).rejects.toBe(bad);
    const last = new TesseraError('ERR_BACKEND_UNAVAILABLE', paravirtual);
    await expect(openFirstAvailable(['metal'], async () => { throw last; }, (l) => warnings.push(l))).rejects.toBe(last);
    expect(warnings).toEqual([]);
  });

  it.skipIf(process.platform === 'darwin')('a real open with backend auto off macOS runs on the CPU and info.backend says so', async () => {
    const tower = await VisionTower.open(join(FIXTURES, 'qwen3_5-tiny', 'model'), { backend: 'auto' });
    try {
      expect(tower.info.backend).toBe('cpu');
    } finally {
      await tower.close();
    }
  });
});
