// The `tessera` command run in this process (src/cli/main.ts's run), its lines collected: what a test of the CLI's
// behaviour needs without spawning node (the spawned CLI is test/helpers/fleet.ts's tessera()).
import { run } from '../../src/cli/main.js';
import type { CliIo } from '../../src/cli/io.js';

export async function tesseraInProcess(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIo = { out: (l) => out.push(l), err: (l) => err.push(l), progress: () => undefined, tty: false, columns: 80 };
  const code = await run(args, io);
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}
