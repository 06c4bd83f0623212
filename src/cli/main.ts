#!/usr/bin/env node
// The `tessera` command: encode, inspect, pack, and the fleet's worker, enqueue and queue-status
// (docs/design.md#command-line, docs/fleet.md). run() is the testable dispatcher;
// running this file binds it to the process.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { packCommand } from './pack.js';
import { tesseraVersion } from './demo.js';
import { encodeCommand } from './encode.js';
import { inspectCommand } from './inspect.js';
import { EXIT_OK, EXIT_USAGE, processIo, type CliIo } from './io.js';

export const USAGE = `usage: tessera <command> [options]

commands:
  encode <image|folder|-...> [--model <path>] [--out file.safetensors | --out-dir DIR]
                    [--format safetensors|npy|vllm|vllm-torch|vllm-encoder-cache|sglang] [--force] [--exclude GLOB] [--backend B] [--residency R]
                    [--min-pixels N] [--max-pixels N] [--max-soft-tokens N] [--batch N] [--stages] [--json]
  inspect <model> [--json]
  pack <model> <outdir> [--dtype f16|bf16|f32]
  worker --redis URL --queue NAME --model PATH --out-dir DIR [--json]     (docs/fleet.md)
  enqueue <image|folder|url|-...> --redis URL --queue NAME [--wait] [--json]
  queue-status --redis URL --queue NAME [--json]

tessera <command> --help for a command's options. Exit codes: 0 success, 1 some inputs failed,
2 usage or model errors, 130 interrupted.`;

export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'encode':
      return encodeCommand(rest, io);
    case 'inspect':
      return inspectCommand(rest, io);
    case 'pack':
      return packCommand(rest, io.out, io.err);
    // The fleet commands load BullMQ and ioredis only when used.
    case 'worker':
      return (await import('./worker.js')).workerCommand(rest, io);
    case 'enqueue':
      return (await import('./enqueue.js')).enqueueCommand(rest, io, readStdin);
    case 'queue-status':
      return (await import('./queue-status.js')).queueStatusCommand(rest, io);
    case '--version':
    case '-v':
      io.out(tesseraVersion());
      return EXIT_OK;
    case '--help':
    case '-h':
    case 'help':
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
