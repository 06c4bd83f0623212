export { chooseResidency, heldWeightBytes, activationBudget, RESIDENCIES } from './policy.js';
export type { Residency, ResidencyRequest, WeightMemory, PolicyInput, PolicyDecision } from './policy.js';
export { splitBatch } from './batch.js';
