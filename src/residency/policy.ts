// The residency policy (docs/design.md#residency): which of the three weight residencies a tower opens with.
// Pure: every input (machine memory, the environment, the native byte counts) is passed in, so
// it is unit-tested without a machine of any particular size. The byte counts come from the
// addon's weightMemory(), i.e. from the formulas the stores allocate by; nothing is restated here.
import { TesseraError } from '../errors.js';

export const RESIDENCIES = ['stream', 'mapped', 'resident'] as const;
export type Residency = (typeof RESIDENCIES)[number];
export type ResidencyRequest = Residency | 'auto';

/** What each residency holds of the weights itself (native weightMemory()). */
export interface WeightMemory {
  resident: number;
  slot: number;
  stream: number;
  fileBytes: number;
  /** What `mapped` holds of its own: quantised tensors widened to f32 (0 for a float tower). */
  mapped: number;
}

export interface PolicyInput {
  requested: ResidencyRequest;
  /** process.env.TESSERA_RESIDENCY: overrides `requested` when set. */
  env?: string | undefined;
  weights: WeightMemory;
  /** The caller's ceiling for the whole tower (weights + activations), in bytes. */
  memoryBudget?: number | undefined;
  freeMem: number;
  totalMem: number;
}

export interface PolicyDecision {
  residency: Residency;
  /** Why: shown in tower.info.memory.reason. */
  reason: string;
}

// Under a budget, weights may take at most this share of it: the rest is for activations,
// whose size depends on the images (a 4k-token page needs ~0.2 GB at hidden 1152).
export const BUDGET_WEIGHT_SHARE = 0.5;
// Without a budget, holding every weight is fine while it takes at most this share of the
// memory free now and of the machine: the first leaves room for activations and the rest of the
// program, the second keeps a big tower from crowding a machine that happens to be idle.
export const FREE_SHARE = 0.5;
export const TOTAL_SHARE = 0.25;

function parseEnv(env: string): ResidencyRequest {
  const v = env.trim().toLowerCase();
  if (v === 'auto' || (RESIDENCIES as readonly string[]).includes(v)) return v as ResidencyRequest;
  throw new TesseraError('ERR_INVALID_ARGUMENT', `TESSERA_RESIDENCY=${env}: expected stream, mapped, resident or auto`);
}

const mb = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

export function chooseResidency(input: PolicyInput): PolicyDecision {
  let requested = input.requested;
  let from = 'requested';
  if (input.env !== undefined && input.env !== '') {
    requested = parseEnv(input.env);
    from = 'TESSERA_RESIDENCY';
  }
  if (requested !== 'auto') return { residency: requested, reason: `${from}: ${requested}` };

  const { resident, stream } = input.weights;
  if (input.memoryBudget !== undefined) {
    const cap = input.memoryBudget * BUDGET_WEIGHT_SHARE;
    if (resident <= cap)
      return { residency: 'resident', reason: `auto: weights ${mb(resident)} fit in ${BUDGET_WEIGHT_SHARE} of memoryBudget ${mb(input.memoryBudget)}` };
    return {
      residency: 'stream',
      reason: `auto: weights ${mb(resident)} exceed ${BUDGET_WEIGHT_SHARE} of memoryBudget ${mb(input.memoryBudget)}: streaming through ${mb(stream)} of slots`,
    };
  }
  const cap = Math.min(input.freeMem * FREE_SHARE, input.totalMem * TOTAL_SHARE);
  if (resident <= cap)
    return { residency: 'resident', reason: `auto: weights ${mb(resident)} fit in memory (${mb(input.freeMem)} free of ${mb(input.totalMem)})` };
  return {
    residency: 'stream',
    reason: `auto: weights ${mb(resident)} are too many for ${mb(input.freeMem)} free of ${mb(input.totalMem)}: streaming through ${mb(stream)} of slots`,
  };
}

/** The weight bytes a residency holds itself (mapped: its widened quantised tensors; the page cache holds the file). */
export function heldWeightBytes(residency: Residency, weights: WeightMemory): number {
  return residency === 'resident' ? weights.resident : residency === 'stream' ? weights.stream : weights.mapped;
}

// Without a memoryBudget, one block-major batch may take this share of the memory free at the
// time of the call for its activations.
export const FREE_ACTIVATION_SHARE = 0.25;

/** Bytes of activations (scratch) one batch may take: what remains of the budget after the weights. */
export function activationBudget(opts: { memoryBudget?: number | undefined; weightBytes: number; freeMem: number }): number {
  if (opts.memoryBudget !== undefined) return Math.max(0, opts.memoryBudget - opts.weightBytes);
  return opts.freeMem * FREE_ACTIVATION_SHARE;
}
