// The residency policy and block-major batch splitting: pure functions, every input injected.
import { describe, expect, it } from 'vitest';
import { activationBudget, chooseResidency, heldWeightBytes, splitBatch, type WeightMemory } from '../src/residency/index.js';
import { TesseraError } from '../src/errors.js';

const GiB = 2 ** 30;
const MiB = 2 ** 20;
// A Qwen3.5-size bf16 tower: 0.8 GB resident, two 32 MiB slots.
const big: WeightMemory = { resident: 0.8 * GiB, slot: 32 * MiB, stream: 64 * MiB, fileBytes: 0.8 * GiB, mapped: 0 };
const tiny: WeightMemory = { resident: 300_000, slot: 32768, stream: 65536, fileBytes: 290_000, mapped: 0 };
const roomy = { freeMem: 16 * GiB, totalMem: 32 * GiB };
const tight = { freeMem: 1 * GiB, totalMem: 8 * GiB };

describe('chooseResidency', () => {
  it('keeps an explicit choice', () => {
    for (const r of ['stream', 'mapped', 'resident'] as const)
      expect(chooseResidency({ requested: r, weights: big, ...tight }).residency).toBe(r);
  });

  it('auto: resident when the weights fit comfortably, stream when memory is tight', () => {
    expect(chooseResidency({ requested: 'auto', weights: big, ...roomy }).residency).toBe('resident');
    expect(chooseResidency({ requested: 'auto', weights: tiny, ...tight }).residency).toBe('resident');
    const d = chooseResidency({ requested: 'auto', weights: big, ...tight });
    expect(d.residency).toBe('stream');
    expect(d.reason).toMatch(/stream/);
    // Plenty free now, but the tower would take more than a quarter of a small machine.
    expect(chooseResidency({ requested: 'auto', weights: big, freeMem: 2.5 * GiB, totalMem: 3 * GiB }).residency).toBe('stream');
  });

  it('auto: a memoryBudget decides over the machine', () => {
    expect(chooseResidency({ requested: 'auto', weights: big, memoryBudget: 450 * MiB, ...roomy }).residency).toBe('stream');
    expect(chooseResidency({ requested: 'auto', weights: big, memoryBudget: 4 * GiB, ...tight }).residency).toBe('resident');
    // The boundary: weights up to half the budget stay resident.
    expect(chooseResidency({ requested: 'auto', weights: big, memoryBudget: 1.6 * GiB, ...roomy }).residency).toBe('resident');
    expect(chooseResidency({ requested: 'auto', weights: big, memoryBudget: 1.6 * GiB - 1, ...roomy }).residency).toBe('stream');
  });

  it('TESSERA_RESIDENCY overrides the option, and a bad value is ERR_INVALID_ARGUMENT', () => {
    expect(chooseResidency({ requested: 'resident', env: 'stream', weights: tiny, ...roomy }).residency).toBe('stream');
    expect(chooseResidency({ requested: 'stream', env: 'MAPPED', weights: tiny, ...roomy }).residency).toBe('mapped');
    expect(chooseResidency({ requested: 'stream', env: 'auto', weights: tiny, ...roomy }).residency).toBe('resident');
    expect(chooseResidency({ requested: 'stream', env: '', weights: tiny, ...roomy }).residency).toBe('stream');
    try {
      chooseResidency({ requested: 'auto', env: 'disk', weights: tiny, ...roomy });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(TesseraError);
      expect((e as TesseraError).code).toBe('ERR_INVALID_ARGUMENT');
      expect((e as TesseraError).message).toMatch(/TESSERA_RESIDENCY=disk/);
    }
  });

  it('weights held per residency and the activation budget left', () => {
    expect(heldWeightBytes('resident', big)).toBe(big.resident);
    expect(heldWeightBytes('stream', big)).toBe(big.stream);
    expect(heldWeightBytes('mapped', big)).toBe(0);
    expect(heldWeightBytes('mapped', { ...big, mapped: 5 * MiB })).toBe(5 * MiB);
    expect(activationBudget({ memoryBudget: 450 * MiB, weightBytes: 64 * MiB, freeMem: 8 * GiB })).toBe(386 * MiB);
    expect(activationBudget({ memoryBudget: 10, weightBytes: 64, freeMem: 8 * GiB })).toBe(0);
    expect(activationBudget({ weightBytes: 64, freeMem: 8 * GiB })).toBe(2 * GiB);
  });
});

describe('splitBatch', () => {
  // A stand-in for the model's plan: affine in rows (the real one comes from the addon).
  const scratch = (rows: number) => 1000 + 10 * rows;

  it('keeps everything in one group when it fits', () => {
    expect(splitBatch([10, 20, 30], scratch, 1000 + 10 * 60)).toEqual([[0, 1, 2]]);
  });

  it('cuts consecutive groups at the budget, in order, every image exactly once', () => {
    const rows = [50, 50, 50, 120, 10, 10, 200, 5];
    const budget = 1000 + 10 * 110;
    const groups = splitBatch(rows, scratch, budget);
    expect(groups.flat()).toEqual(rows.map((_, i) => i));
    for (const g of groups) {
      const sum = g.reduce((a, i) => a + rows[i]!, 0);
      // Over budget only when a single image alone is (admission refuses those earlier).
      if (scratch(sum) > budget) expect(g.length).toBe(1);
    }
    expect(groups).toEqual([[0, 1], [2], [3], [4, 5], [6], [7]]);
  });

  it('handles no images', () => {
    expect(splitBatch([], scratch, 1)).toEqual([]);
  });
});
