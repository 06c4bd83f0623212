#!/usr/bin/env node
// The `tessera` command: encode, inspect, pack, doctor, and the fleet's worker, enqueue and queue-status
// (docs/design.md#command-line, docs/fleet.md). run() is the testable dispatcher;
// running this file binds it to the process.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { COMMANDS } from './commands.js';
import { helpOf, summaryOf } from './flags.js';
import { packCommand } from './pack.js';
import { tesseraVersion } from '../version.js';
import { encodeCommand } from './encode.js';
import { inspectCommand } from './inspect.js';
import { EXIT_OK, EXIT_USAGE, processIo, type CliIo } from './io.js';

export const USAGE = `usage: tessera <command> [options]

commands:
${COMMANDS.map(summaryOf).join('\n')}

tessera <command> --help (or tessera help <command>) for a command's options; the fleet's commands:
docs/fleet.md. Exit codes: 0 success,
1 some inputs failed, 2 usage or model errors, 130 interrupted.`;

/** A command's help asked for: `tessera <command> --help` (or -h, before any `--`). */
function asksHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  // Every command's help comes from its flag table, whatever else is on the line.
  const named = COMMANDS.find((c) => c.name === (command === 'help' ? rest[0] : command));
  if (named && (command === 'help' || asksHelp(rest))) {
    io.out(helpOf(named));
    return EXIT_OK;
  }
  switch (command) {
    case 'encode':
      return encodeCommand(rest, io);
    case 'inspect':
      return inspectCommand(rest, io);
    case 'pack':
      return packCommand(rest, io.out, io.err);
    // The fleet commands load BullMQ and ioredis (optional peer dependencies) only when used.
    case 'worker':
      return (await import('./worker.js')).workerCommand(rest, io);
    case 'enqueue':
      return (await import('./enqueue.js')).enqueueCommand(rest, io, readStdin);
    case 'queue-status':
      return (await import('./queue-status.js')).queueStatusCommand(rest, io);
    case 'doctor':
      return (await import('./doctor.js')).doctorCommand(rest, io);
    case '--version':
    case '-v':
      io.out(tesseraVersion());
      return EXIT_OK;
    case '--help':
    case '-h':
    case 'help':
      if (rest[0] !== undefined) {
        io.err(`tessera help: unknown command '${rest[0]}'\n${USAGE}`);
        return EXIT_USAGE;
      }
      io.out(USAGE);
      return EXIT_OK;
    default:
      io.err(command === undefined ? USAGE : `tessera: unknown command '${command}'\n${USAGE}`);
      return EXIT_USAGE;
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function isEntry(): boolean {
  try {
    return process.argv[1] !== undefined && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntry()) {
  run(process.argv.slice(2), processIo()).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`tessera: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
      process.exitCode = EXIT_USAGE;
    },
  );
}
