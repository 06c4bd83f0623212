// What JSON.parse lets through silently in a weights header: an object that names a key twice
// (the last one wins, so a header could describe one tensor twice and have the second silently
// replace the first) and nesting far deeper than any header needs (a hostile file's 100,000-deep
// dtype would then overflow the stack of whatever walks it). One pass over the text, no recursion.

export interface JsonStructureLimits {
  /** Containers (objects and arrays) open at once, at most. */
  maxDepth: number;
}

/**
 * Why `text` (already known to be valid JSON) is refused, or undefined. A duplicate is named with
 * the top-level key it sits under (a safetensors header's tensor name).
 */
export function jsonStructureProblem(text: string, limits: JsonStructureLimits): string | undefined {
  // One entry per open container: the keys an object has named so far, or null for an array.
  const open: (Set<string> | null)[] = [];
  let expectKey = false;
  let topKey = '';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (expectKey) {
        const raw = text.slice(i + 1, j);
        const key = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
        const keys = open[open.length - 1]!;
        if (keys.has(key)) return open.length === 1 ? `key '${key}' appears twice` : `key '${key}' appears twice in '${topKey}'`;
        keys.add(key);
        if (open.length === 1) topKey = key;
        expectKey = false;
      }
      i = j;
    } else if (ch === '{' || ch === '[') {
      open.push(ch === '{' ? new Set() : null);
      if (open.length > limits.maxDepth) return `nested deeper than ${limits.maxDepth} levels${topKey ? ` (in '${topKey}')` : ''}`;
      expectKey = ch === '{';
    } else if (ch === '}' || ch === ']') {
      open.pop();
      expectKey = false;
    } else if (ch === ',') {
      expectKey = open[open.length - 1] instanceof Set;
    }
  }
  return undefined;
}
