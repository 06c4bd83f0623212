// The flag table of every `tessera` command: each flag once, with its value, its choices (the
// library's own lists), the option object it fills (group) and its key there. The parser, each
// command's usage text and `tessera --help` come from here (src/cli/flags.ts); the values are then
// checked by the library's zod schemas (open: OpenOptionsSchema, encode: encodeManyOptionsSchema,
// bulk: BulkOutputOptionsSchema, job: the fleet's JobOptionsSchema).
import { GEMMA_SOFT_TOKEN_BUDGETS } from '../image/config.js';
import { BACKENDS, DEFAULT_BATCH, OUTPUT_FORMATS, PRECISIONS, RESIDENCIES } from '../options.js';
import { DTYPES } from '../spec/types.js';
import { MAX_GROUP_IMAGES } from '../fleet/job.js';
import type { Command, Flag } from './flags.js';

const open = {
  backend: { type: 'string', choices: BACKENDS, group: 'open' },
  residency: { type: 'string', choices: RESIDENCIES, group: 'open' },
  precision: { type: 'string', choices: PRECISIONS, group: 'open' },
} satisfies Record<string, Flag>;

/** The options that change an image's output (encode's, and a fleet job's): the sizing keys of both families and --stages. */
const sizing = (group: string) =>
  ({
    'min-pixels': { type: 'int', group },
    'max-pixels': { type: 'int', group },
    'max-soft-tokens': { type: 'int', choices: GEMMA_SOFT_TOKEN_BUDGETS, group },
  }) satisfies Record<string, Flag>;

const redis = {
  redis: { type: 'string', value: 'URL', required: true },
  queue: { type: 'string', value: 'NAME', required: true },
} satisfies Record<string, Flag>;

export const ENCODE: Command = {
  name: 'encode',
  args: '<image|folder|-...>',
  flags: {
    model: { type: 'string', value: 'PATH' },
    out: { type: 'string', value: 'file.safetensors', group: 'bulk' },
    'out-dir': { type: 'string', value: 'DIR', group: 'bulk' },
    format: { type: 'string', choices: OUTPUT_FORMATS, group: 'bulk' },
    force: { type: 'boolean', group: 'bulk' },
    'hash-inputs': { type: 'boolean', group: 'bulk' },
    exclude: { type: 'string', value: 'GLOB', multiple: true, group: 'bulk' },
    ...open,
    ...sizing('encode'),
    batch: { type: 'int', group: 'encode' },
    stages: { type: 'boolean', group: 'encode' },
    json: { type: 'boolean' },
  },
  notes:
    `Folders are read recursively (image extensions, any case); '-' reads a newline-separated list of paths from stdin.\n` +
    `--batch N: images encoded together (default ${DEFAULT_BATCH}). Without --model, a small demo tower with random weights is used.`,
};

export const INSPECT: Command = {
  name: 'inspect',
  args: '<model>',
  flags: { json: { type: 'boolean' } },
};

export const PACK: Command = {
  name: 'pack',
  args: '<model> <outdir>',
  flags: { dtype: { type: 'string', choices: DTYPES } },
};

export const WORKER: Command = {
  name: 'worker',
  flags: {
    ...redis,
    model: { type: 'string', value: 'PATH', required: true },
    'out-dir': { type: 'string', value: 'DIR', required: true },
    name: { type: 'string', value: 'NAME' },
    json: { type: 'boolean' },
    backend: { ...open.backend, detail: true },
    residency: { ...open.residency, detail: true },
    precision: { ...open.precision, detail: true },
    threads: { type: 'int', min: 0, group: 'open', detail: true },
    'lock-duration': { type: 'int', value: 'MS', key: 'lockDurationMs', group: 'worker', detail: true },
    'stalled-interval': { type: 'int', value: 'MS', key: 'stalledIntervalMs', group: 'worker', detail: true },
    'max-stalled': { type: 'int', min: 0, key: 'maxStalledCount', group: 'worker', detail: true },
    'max-fetch-bytes': { type: 'int', key: 'maxBytes', group: 'fetch', detail: true },
    'allow-private-urls': { type: 'boolean', key: 'allowPrivateUrls', group: 'fetch', detail: true },
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
    wait: { type: 'boolean' },
    json: { type: 'boolean' },
    format: { type: 'string', choices: OUTPUT_FORMATS, group: 'job', detail: true },
    exclude: { type: 'string', value: 'GLOB', multiple: true, detail: true },
    ...Object.fromEntries(Object.entries(sizing('job')).map(([k, f]) => [k, { ...f, detail: true }])),
    stages: { type: 'boolean', group: 'job', detail: true },
    group: { type: 'int', max: MAX_GROUP_IMAGES },
    attempts: { type: 'int', detail: true },
    'backoff-ms': { type: 'int', value: 'MS', detail: true },
    'progress-interval': { type: 'int', value: 'S', detail: true },
  },
  notes:
    `'-' reads a newline-separated list of inputs from stdin. --group N: N images per job (1 to ${MAX_GROUP_IMAGES}; default 1),\n` +
    'encoded together by one worker. Exit codes with --wait: 0 all images completed, 1 some failed.',
};

export const QUEUE_STATUS: Command = {
  name: 'queue-status',
  flags: { ...redis, json: { type: 'boolean' } },
};

export const DOCTOR: Command = {
  name: 'doctor',
  flags: { json: { type: 'boolean' }, backend: { type: 'string', choices: BACKENDS.filter((b) => b !== 'auto'), multiple: true } },
  notes: 'Runs the built-in fixture towers on every available backend (or each --backend) against HF (docs/metal.md#tessera-doctor).',
};

/** In the order `tessera --help` lists them. */
export const COMMANDS: readonly Command[] = [ENCODE, INSPECT, PACK, WORKER, ENQUEUE, QUEUE_STATUS, DOCTOR];
