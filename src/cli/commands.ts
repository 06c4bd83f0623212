// The flag table of every `tessera` command: each flag once, with its value, its choices (the
// library's own lists), the option object it fills (group) and its key there. The parser, each
// command's usage text and `tessera --help` come from here (src/cli/flags.ts); the values are then
// checked by the library's zod schemas (open: OpenOptionsSchema, encode: encodeManyOptionsSchema,
// bulk: BulkOutputOptionsSchema, job: the fleet's JobOptionsSchema).
import { GEMMA_SOFT_TOKEN_BUDGETS } from '../image/config.js';
import { BACKENDS, DEFAULT_BATCH, OUTPUT_DTYPES, OUTPUT_FORMATS, PRECISIONS, RESIDENCIES } from '../options.js';
import { COMPUTE_DTYPES } from '../spec/types.js';
import { DEFAULT_ATTEMPTS, DEFAULT_BACKOFF_MS, MAX_GROUP_IMAGES } from '../fleet/job.js';
import { DEFAULT_MAX_FETCH_BYTES } from '../fleet/fetch-input.js';
import type { Command, Flag } from './flags.js';

const open = {
  backend: { type: 'string', choices: BACKENDS, group: 'open', default: 'auto', help: 'where the tower runs: auto takes Metal on a Mac that has it, else the CPU' },
  residency: { type: 'string', choices: RESIDENCIES, group: 'open', default: 'auto', help: 'how the weights are held: streamed block by block, mapped from the file, or all resident (docs/design.md)' },
  precision: { type: 'string', choices: PRECISIONS, group: 'open', default: 'f32', help: 'what the tower computes in: bf16 = the CPU linears in bf16 where the CPU has bf16 units (docs/bf16.md), Metal with bfloat activations and tiles on macOS 14+; f16 = Metal with half activations and tiles (docs/metal.md); elsewhere f32 runs and info.precision says so' },
} satisfies Record<string, Flag>;

/** The options that change an image's output (encode's, and a fleet job's): the sizing keys of both families and --stages. */
const sizing = (group: string) =>
  ({
    'min-pixels': { type: 'int', group, default: "the model's preprocessor", help: 'Qwen: an image smaller than this many pixels is scaled up' },
    'max-pixels': { type: 'int', group, default: "the model's preprocessor", help: 'Qwen: an image larger than this many pixels is scaled down' },
    'max-soft-tokens': { type: 'int', choices: GEMMA_SOFT_TOKEN_BUDGETS, group, default: "the model's preprocessor", help: 'Gemma 4: the most tokens an image becomes' },
  }) satisfies Record<string, Flag>;

const redis = {
  redis: { type: 'string', value: 'URL', required: true, help: 'the Redis server of the fleet (redis://host:port)' },
  queue: { type: 'string', value: 'NAME', required: true, help: 'the queue to use' },
} satisfies Record<string, Flag>;

export const ENCODE: Command = {
  name: 'encode',
  args: '<image|folder|-...>',
  flags: {
    model: { type: 'string', value: 'PATH', default: 'a small demo tower with RANDOM weights', help: 'the tower: a Hugging Face folder, a .safetensors file, a GGUF mmproj or a tessera pack' },
    out: { type: 'string', value: 'file.safetensors', group: 'bulk', help: 'write every image of the run into one safetensors file (image.<i>.<tensor>)' },
    'out-dir': { type: 'string', value: 'DIR', group: 'bulk', help: 'write one output per image under DIR, mirroring the inputs, and skip those already up to date' },
    format: { type: 'string', choices: OUTPUT_FORMATS, group: 'bulk', default: 'safetensors', help: "--out-dir's file format (docs/downstream.md for vllm and sglang)" },
    'out-dtype': { type: 'string', choices: OUTPUT_DTYPES, key: 'outputDtype', group: 'bulk', default: 'f32', help: 'write the float tensors in this dtype (rounded to nearest even, as torch does; bf16 halves the files, and the engines cast to bf16 anyway)' },
    force: { type: 'boolean', group: 'bulk', help: '--out-dir: encode again images whose output is up to date' },
    'hash-inputs': { type: 'boolean', group: 'bulk', help: "--out-dir: tell an input changed by its SHA-256, not only by its size and mtime" },
    exclude: { type: 'string', value: 'GLOB', multiple: true, group: 'bulk', help: "leave out inputs matching GLOB (a pattern without '/' matches a base name)" },
    ...open,
    ...sizing('encode'),
    batch: { type: 'int', group: 'encode', default: String(DEFAULT_BATCH), help: 'images encoded together' },
    stages: { type: 'boolean', group: 'encode', help: "also write every stage's output (for comparisons with a reference)" },
    json: { type: 'boolean', help: 'print JSON Lines on stdout: a record per image, errors and the summary' },
    quiet: { type: 'boolean', help: 'print only failures and the summary line; no progress bar' },
  },
  notes: `Folders are read recursively (image extensions, any case); '-' reads a newline-separated list of paths from stdin.`,
};

export const INSPECT: Command = {
  name: 'inspect',
  args: '<model>',
  flags: { json: { type: 'boolean', help: 'print the description as one JSON object' } },
};

export const PACK: Command = {
  name: 'pack',
  args: '<model> <outdir>',
  flags: { dtype: { type: 'string', choices: COMPUTE_DTYPES, default: "the checkpoint's own", help: 'convert the weights to this dtype' } },
};

export const WORKER: Command = {
  name: 'worker',
  flags: {
    ...redis,
    model: { type: 'string', value: 'PATH', required: true, help: 'the tower this worker encodes with' },
    'out-dir': { type: 'string', value: 'DIR', required: true, help: "where the jobs' outputs are written (shared by the fleet)" },
    name: { type: 'string', value: 'NAME', default: 'host:pid', help: 'names this worker in job records, logs and queue-status' },
    json: { type: 'boolean', help: 'log JSON Lines' },
    backend: { ...open.backend, detail: true },
    residency: { ...open.residency, detail: true },
    precision: { ...open.precision, detail: true },
    threads: { type: 'int', min: 0, group: 'open', detail: true, default: '0 (one per core)', help: 'CPU threads of the encode' },
    'lock-duration': { type: 'int', value: 'MS', key: 'lockDurationMs', group: 'worker', detail: true, default: '30000', help: "BullMQ's job lock: how soon a dead worker's job is taken over" },
    'stalled-interval': { type: 'int', value: 'MS', key: 'stalledIntervalMs', group: 'worker', detail: true, default: '30000', help: 'how often stalled jobs are looked for' },
    'max-stalled': { type: 'int', min: 0, key: 'maxStalledCount', group: 'worker', detail: true, default: '1', help: 'how often a job may be taken back from a dead worker before it fails' },
    'max-fetch-bytes': { type: 'int', key: 'maxBytes', group: 'fetch', detail: true, default: String(DEFAULT_MAX_FETCH_BYTES), help: 'the largest image a URL input may be' },
    'allow-private-urls': { type: 'boolean', key: 'allowPrivateUrls', group: 'fetch', detail: true, help: 'fetch URL inputs on loopback, private, link-local or unique-local addresses' },
  },
  notes:
    'Runs until SIGTERM/SIGINT, which finish the current job and exit 0 (docs/fleet.md). URL inputs on loopback, private,\n' +
    'link-local or unique-local addresses are refused unless --allow-private-urls (docs/fleet.md#urls).',
};

export const ENQUEUE: Command = {
  name: 'enqueue',
  args: '<image|folder|url|-...>',
  flags: {
    ...redis,
    wait: { type: 'boolean', help: 'wait for the jobs to finish, printing progress' },
    json: { type: 'boolean', help: 'print JSON Lines' },
    format: { type: 'string', choices: OUTPUT_FORMATS, group: 'job', detail: true, default: 'safetensors', help: 'the output format (as encode --format)' },
    'out-dtype': { type: 'string', choices: OUTPUT_DTYPES, key: 'outputDtype', group: 'job', detail: true, default: 'f32', help: 'the float tensors\' dtype (as encode --out-dtype)' },
    exclude: { type: 'string', value: 'GLOB', multiple: true, detail: true, help: 'leave out inputs matching GLOB' },
    ...Object.fromEntries(Object.entries(sizing('job')).map(([k, f]) => [k, { ...f, detail: true }])),
    stages: { type: 'boolean', group: 'job', detail: true, help: "also write every stage's output" },
    group: { type: 'int', max: MAX_GROUP_IMAGES, default: '1', help: `images per job (1 to ${MAX_GROUP_IMAGES}), encoded together by one worker` },
    attempts: { type: 'int', detail: true, default: String(DEFAULT_ATTEMPTS), help: 'tries of a job before it fails' },
    'backoff-ms': { type: 'int', value: 'MS', detail: true, default: String(DEFAULT_BACKOFF_MS), help: 'first wait before a retry (doubling)' },
    'progress-interval': { type: 'int', value: 'S', detail: true, default: '5', help: '--wait without a terminal: seconds between progress lines' },
  },
  notes: `'-' reads a newline-separated list of inputs from stdin. Exit codes with --wait: 0 all images completed, 1 some failed.`,
};

export const QUEUE_STATUS: Command = {
  name: 'queue-status',
  flags: { ...redis, json: { type: 'boolean', help: 'print one JSON object' } },
};

export const DOCTOR: Command = {
  name: 'doctor',
  flags: {
    json: { type: 'boolean', help: 'print one JSON object' },
    backend: { type: 'string', choices: BACKENDS.filter((b) => b !== 'auto'), multiple: true, default: 'every available backend', help: 'a backend to check' },
  },
  notes: 'Runs the built-in fixture towers on every available backend (or each --backend) against HF (docs/metal.md#tessera-doctor).',
};

/** In the order `tessera --help` lists them. */
export const COMMANDS: readonly Command[] = [ENCODE, INSPECT, PACK, WORKER, ENQUEUE, QUEUE_STATUS, DOCTOR];
