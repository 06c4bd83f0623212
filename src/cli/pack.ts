// `tessera pack <model> <outdir> [--dtype f16|bf16|f32]`: the command's argument handling, for the
// CLI's dispatcher. Returns the exit code (0 packed; 2 usage or model errors, docs/design.md#command-line).
import { TesseraError, toTesseraError } from '../errors.js';
import { loadModel } from '../load-model.js';
import { packModel } from '../pack/pack.js';
import type { DType } from '../spec/types.js';

export const PACK_USAGE = 'usage: tessera pack <model> <outdir> [--dtype f16|bf16|f32]';

export async function packCommand(args: readonly string[], print: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  printError: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  const positional: string[] = [];
  let dtype: DType | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--dtype' || a.startsWith('--dtype=')) {
      const v = a.includes('=') ? a.slice(a.indexOf('=') + 1) : args[++i];
      if (v !== 'f16' && v !== 'bf16' && v !== 'f32') {
        printError(`tessera pack: --dtype must be f16, bf16 or f32 (got ${v === undefined ? 'nothing' : `'${v}'`})\n${PACK_USAGE}`);
        return 2;
      }
      dtype = v;
    } else if (a.startsWith('-')) {
      printError(`tessera pack: unknown option ${a}\n${PACK_USAGE}`);
      return 2;
    } else positional.push(a);
  }
  if (positional.length !== 2) {
    printError(PACK_USAGE);
    return 2;
  }
  const [model, outDir] = positional as [string, string];
  try {
    const started = performance.now();
    const r = await packModel(await loadModel(model), outDir, { dtype });
    print(`packed ${model} -> ${r.outDir}: ${r.stages} stages, ${(r.bytes / 2 ** 20).toFixed(1)} MiB${dtype ? ` (matrices as ${dtype})` : ''} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return 0;
  } catch (e) {
    const err = e instanceof TesseraError ? e : toTesseraError(e);
    printError(`tessera pack: ${err.code}: ${err.message}`);
    return 2;
  }
}
