// The shape rules every family's builder applies to its dimensions, stated once. Native code asserts the
// same invariants as internal errors; a config that breaks one is refused here, naming the field.

/**
 * A head of a 2D-rope vision tower splits its width into two rope axes (rows, columns) of (cos, sin) pairs,
 * so head_dim is a whole multiple of 4. Returns why `headDim` breaks the rule, or undefined.
 */
export function headDimProblem(headDim: number): string | undefined {
  return Number.isInteger(headDim) && headDim > 0 && headDim % 4 === 0
    ? undefined
    : `head_dim ${headDim} must be a multiple of 4 (two rope axes of pairs)`;
}

/** A width split into `heads` equal heads that each satisfy headDimProblem; why not, or undefined. */
export function headSplitProblem(hidden: number, heads: number): string | undefined {
  if (hidden % heads !== 0) return `${hidden} does not split into ${heads} heads`;
  const why = headDimProblem(hidden / heads);
  return why && `${hidden} in ${heads} heads: ${why}`;
}
