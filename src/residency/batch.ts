// Block-major batches (docs/design.md#batches): the images of one native call all pass stage n before any
// passes stage n+1, so the weights are read once per call, not once per image. A long list of
// images is cut into consecutive groups whose activations fit a budget; the scratch bytes of a
// group come from the model's own allocation plan (tower.scratchBytes, through the addon).

/**
 * Splits images (given as patch-row counts, in order) into consecutive groups such that
 * scratchBytes(sum of rows of the group) <= budget. An image that alone passes the budget gets a
 * group of its own (admission refuses such images before this point with ERR_IMAGE_TOO_LARGE).
 * Returns the groups as lists of image indices.
 */
export function splitBatch(rows: readonly number[], scratchBytes: (rows: number) => number, budget: number): number[][] {
  const groups: number[][] = [];
  let group: number[] = [];
  let groupRows = 0;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    if (group.length && scratchBytes(groupRows + r) > budget) {
      groups.push(group);
      group = [];
      groupRows = 0;
    }
    group.push(i);
    groupRows += r;
  }
  if (group.length) groups.push(group);
  return groups;
}
