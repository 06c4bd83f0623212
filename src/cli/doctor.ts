// `tessera doctor [--json] [--backend B]...`: the library's runDoctor (src/doctor.ts) printed as a summary, or
// as one JSON document (--json) to attach to a bug report. Exit 0 when every available backend agrees with
// HF, 1 when one disagrees or fails, 2 on usage errors.
import { runDoctor, type DoctorReport, type DoctorRun } from '../doctor.js';
import { toTesseraError } from '../errors.js';
import { DOCTOR } from './commands.js';
import { parseFlags, usageOf } from './flags.js';
import { EXIT_OK, EXIT_SOME_FAILED, EXIT_USAGE, formatBytes, table, type CliIo } from './io.js';

export const DOCTOR_USAGE = usageOf(DOCTOR);

const sci = (v: number | undefined) => (v === undefined ? '' : v.toExponential(1));

// A run's name: its backend, and the precision where it is not f32 (Metal runs each fixture in f32 and f16).
const label = (run: DoctorRun) => (run.precision === 'f32' ? run.backend : `${run.backend} (${run.precision})`);

function summary(r: DoctorReport): string[] {
  const g = r.gpu;
  const lines = [
    `tessera ${r.tessera}, node ${r.node}, ${r.platform}/${r.arch}`,
    `CPU: ${r.cpu.model}, ${r.cpu.cores} cores, kernels ${r.cpu.isa}`,
    g.available
      ? `GPU: ${g.name}, family Apple${g.appleFamily}${g.metal3 ? ', Metal 3' : ''}, working set ${formatBytes(g.workingSetBytes ?? 0)}, threadgroup memory ${g.maxThreadgroupMemory} B` +
        (g.missing ? `: cannot run the kernels, lacks ${g.missing}` : '')
      : `GPU: none usable (${g.reason})`,
    ...r.backends.map((b) => `backend ${b.name}: ${b.available ? 'available' : `unavailable (${b.reason})`}`),
  ];
  for (const t of r.towers) {
    lines.push('', `${t.name} (${t.family}, ${t.patches} patches)`);
    for (const run of t.runs) {
      if (run.error && !run.stages.length) {
        lines.push(`  ${label(run)}: FAILED: ${run.error}`);
        continue;
      }
      lines.push(`  ${label(run)}: ${run.ok ? 'ok' : 'DISAGREES'}, ${run.ms!.toFixed(1)} ms, max error vs HF ${sci(run.maxVsHf)} (tolerance ${run.tolerance})` +
        (run.maxVsCpu !== undefined ? `, vs cpu ${sci(run.maxVsCpu)}` : ''));
      const m = run.costModel;
      if (m) lines.push(m.predictedMs !== undefined
        ? `    cost model for ${m.gpu}: ${m.predictedMs.toFixed(2)} ms predicted, measured / predicted = ${m.measuredOverPredicted!.toFixed(1)} (launch overhead is not modelled)`
        : `    cost model for ${m.gpu}: ${m.note}`);
      const rows = run.stages.map((s) => [s.name, Number.isNaN(s.ms) ? '' : s.ms.toFixed(2), sci(s.vsHf), sci(s.vsCpu)]);
      lines.push(...table(['    stage', 'ms', 'vs HF', 'vs cpu'], rows.map((r0) => [`    ${r0[0]}`, ...r0.slice(1)]), [false, true, true, true]));
    }
  }
  lines.push('', r.verdict.summary, ...r.verdict.problems.map((p) => `  ${p}`));
  return lines;
}

export async function doctorCommand(args: readonly string[], io: CliIo): Promise<number> {
  let values: { json?: boolean; backend?: string[] };
  try {
    const parsed = parseFlags(DOCTOR, args);
    if (parsed.help) {
      io.out(DOCTOR_USAGE);
      return EXIT_OK;
    }
    values = (parsed.groups['cli'] ?? {}) as typeof values;
  } catch (e) {
    io.err(`tessera doctor: ${(e as Error).message}\n${DOCTOR_USAGE}`);
    return EXIT_USAGE;
  }
  let report: DoctorReport;
  try {
    report = await runDoctor(values.backend ? { backends: values.backend } : {});
  } catch (e) {
    const err = toTesseraError(e);
    io.err(`tessera doctor: ${err.code}: ${err.message}`);
    return EXIT_USAGE;
  }
  if (values.json) io.out(JSON.stringify(report, null, 2));
  else io.out(summary(report).join('\n'));
  return report.verdict.ok ? EXIT_OK : EXIT_SOME_FAILED;
}
