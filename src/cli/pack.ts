// `tessera pack <model> <outdir> [--dtype f16|bf16|f32]`: the command's argument handling, for the
// CLI's dispatcher. Returns the exit code (0 packed; 2 usage or model errors, docs/design.md#command-line).
import { TesseraError, toTesseraError } from '../errors.js';
import { loadModel } from '../load-model.js';
import { packModel } from '../pack/pack.js';
import type { ComputeDType } from '../spec/types.js';
import { PACK } from './commands.js';
import { parseFlags, usageOf, UsageError } from './flags.js';

export const PACK_USAGE = usageOf(PACK);

export async function packCommand(args: readonly string[], print: (line: string) => void = (l) => process.stdout.write(l + '\n'),
  printError: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<number> {
  let positional: string[];
  let dtype: ComputeDType | undefined;
  try {
    const parsed = parseFlags(PACK, args);
    if (parsed.help) {
      print(PACK_USAGE);
      return 0;
    }
    positional = parsed.positionals;
    dtype = parsed.groups['cli']?.['dtype'] as ComputeDType | undefined;
    if (positional.length !== 2) throw new UsageError('expected a model path and an output folder');
  } catch (e) {
    printError(`tessera pack: ${(e as Error).message}\n${PACK_USAGE}`);
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
