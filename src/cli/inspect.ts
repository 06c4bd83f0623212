// `tessera inspect <model> [--json]`: what a tower is, from its files alone (opened mapped, so
// nothing is read beyond headers and pages touched): family, source, dimensions, dtypes, the
// tensors of each kind of stage with their shapes, and the bytes each residency holds.
import { toTesseraError } from '../errors.js';
import { familyOf } from '../families/registry.js';
import { ggufKind, readGgufHeader } from '../formats/gguf.js';
import type { StageSpec } from '../spec/types.js';
import { stageBytes } from '../tower-info.js';
import { VisionTower } from '../tower.js';
import { INSPECT } from './commands.js';
import { parseFlags, usageOf, UsageError } from './flags.js';
import { EXIT_OK, EXIT_USAGE, formatBytes, table, type CliIo } from './io.js';

export const INSPECT_USAGE = usageOf(INSPECT);

interface StageSummary {
  name: string;
  kind: string;
  bytes: number;
  tensors: { role: string; name: string; dtype: string; shape: number[] }[];
}

/** The tower's tensors by stored type ("F32 x 30, Q8_0 x 9"), an assembled tensor counted once. */
function tensorTypes(stages: readonly StageSpec[]): Record<string, number> {
  const n: Record<string, number> = {};
  for (const s of stages) for (const t of s.tensors) n[t.dtype.toUpperCase()] = (n[t.dtype.toUpperCase()] ?? 0) + 1;
  return n;
}

function summarise(s: StageSpec): StageSummary {
  return {
    name: s.name,
    kind: s.kind,
    bytes: stageBytes(s),
    tensors: s.tensors.map((t) => ({ role: t.role, name: t.name, dtype: t.dtype, shape: t.shape })),
  };
}

export async function inspectCommand(args: readonly string[], io: CliIo): Promise<number> {
  // With --json a refusal is one JSON error record on stdout, as encode's.
  const jsonAsked = args.includes('--json');
  const fatal = (code: string, message: string, usage = false): number => {
    if (jsonAsked) io.out(JSON.stringify({ type: 'error', code, message, exitCode: EXIT_USAGE }));
    else io.err(`tessera inspect: ${code === 'ERR_USAGE' ? '' : `${code}: `}${message}${usage ? `\n${INSPECT_USAGE}` : ''}`);
    return EXIT_USAGE;
  };
  let json: boolean;
  let positionals: string[];
  try {
    const parsed = parseFlags(INSPECT, args);
    if (parsed.help) {
      io.out(INSPECT_USAGE);
      return EXIT_OK;
    }
    ({ positionals } = parsed);
    json = Boolean(parsed.groups['cli']?.['json']);
    if (positionals.length !== 1) throw new UsageError('expected one model path');
  } catch (e) {
    return fatal('ERR_USAGE', (e as Error).message, true);
  }
  const path = positionals[0]!;
  let tower: VisionTower;
  try {
    tower = await VisionTower.open(path, { residency: 'mapped', backend: 'cpu' });
  } catch (e) {
    const err = toTesseraError(e);
    return fatal(err.code, err.message);
  }
  try {
    const info = tower.info;
    const stages = tower.spec.stages.map(summarise);
    const blocks = stages.filter((s) => s.kind === 'block');
    // A llama.cpp mmproj names its projector type: what llama.cpp and its users call the file's kind.
    const projector = info.source === 'gguf-llama.cpp' ? (ggufKind(await readGgufHeader(path)).projector ?? null) : null;
    const types = tensorTypes(tower.spec.stages);
    if (json) {
      const { memory, ...rest } = info;
      io.out(JSON.stringify({ ...rest, projector, tensorTypes: types, memory: { residentBytes: memory.residentBytes, slotBytes: memory.slotBytes, streamBytes: memory.streamBytes, mappedBytes: memory.mappedBytes, fileBytes: memory.fileBytes }, preprocessor: tower.preprocessorConfig ?? null, stages }, null, 2));
      return EXIT_OK;
    }
    const m = info.memory;
    const pre = tower.preprocessorConfig;
    const budget = familyOf(info.family).images.describeSizing(tower.spec, pre);
    const lines = table(
      ['', ''],
      [
        ['model', path],
        ['family', `${info.family} (${info.source})${projector ? `, projector ${projector}` : ''}`],
        ['tower', `${info.depth} blocks, hidden ${info.hidden}, ${info.heads} heads x ${info.headDim}, output width ${info.outHidden}`],
        ['patches', `${info.patchSize} px, merge ${info.mergeSize}`],
        ['dtype', info.dtype],
        ['tensor types', Object.entries(types).map(([k, v]) => `${k} x ${v}`).join(', ')],
        ['weights', `${formatBytes(info.bytes.total)} total; ${formatBytes(info.bytes.perBlock)} per block; ${formatBytes(info.bytes.nonBlock)} outside the blocks`],
        ['resident', `${formatBytes(m.residentBytes)} held (residency resident)`],
        ['stream', `${formatBytes(m.slotBytes)} per slot, ${formatBytes(m.streamBytes)} held with the default slots`],
        ['mapped', `${formatBytes(m.fileBytes)} of files mapped${m.mappedBytes ? `; ${formatBytes(m.mappedBytes)} held (Q8_0 tensors widened to f32, split tensors joined)` : ''}`],
        ['images', budget],
      ],
      [false, false],
    ).slice(1);
    lines.forEach((l) => io.out(l));
    io.out('');
    io.out('stages (execution order):');
    const shown = stages.filter((s) => s.kind !== 'block' || s === blocks[0]);
    const rows: string[][] = [];
    for (const s of shown) {
      const label = s.kind === 'block' && blocks.length > 1 ? `${s.name} (x${blocks.length}, same shapes)` : s.name;
      rows.push([label, s.kind, '', '', formatBytes(s.bytes)]);
      for (const t of s.tensors) rows.push([`  ${t.role}`, '', t.dtype, `[${t.shape.join(', ')}]`, '']);
    }
    table(['stage / tensor', 'kind', 'dtype', 'shape', 'bytes'], rows, [false, false, false, false, true]).forEach((l) => io.out(l));
    return EXIT_OK;
  } finally {
    await tower.close();
  }
}
