// A job's images through the one bulk runner (src/bulk/runner.ts): a group job
// (docs/fleet.md#group-jobs) is up to MAX_GROUP_IMAGES images with one set of options, encoded
// together by tower.encodeMany (block-major, as `tessera encode` does); an image job is a group of
// one. Each image is written by the --out-dir writer, so every file is the one `encode --out-dir`
// writes, and an image whose output is already up to date is skipped.
//
// One image's input error (ERR_IMAGE_*, ERR_INVALID_ARGUMENT, ERR_NUMERIC) does not cost the others:
// they are written and the image is listed as failed, with its code, in the job's result. A
// transient error on any image (I/O, a fetch, out of memory) is returned once the rest are written:
// the job is retried, and the retry skips every output already up to date, so nothing is done twice.
import { TesseraError } from '../errors.js';
import type { EncodeOptions, VisionTower } from '../tower.js';
import { checkDistinctOutputs, runBulk, type OutputJob } from '../bulk/index.js';
import { loadJobInput, type FetchLimits } from './fetch-input.js';
import { isPermanent, type GroupImageResult, type GroupJobResult } from './job.js';
import { imageResult, jobInput } from './job-output.js';

export interface GroupOutcome {
  /** Every image, in the job's order. */
  images: GroupImageResult[];
  /** The first transient error among the images (the job must be retried), if any. */
  transient?: TesseraError;
  encoded: number;
  timings: Omit<GroupJobResult['timings'], 'totalMs'>;
}

export async function runGroup(
  tower: VisionTower,
  out: OutputJob,
  encodeOptions: EncodeOptions,
  inputs: readonly { input: string; rel?: string | undefined }[],
  fetch?: FetchLimits,
): Promise<GroupOutcome> {
  const bulk = inputs.map((i) => jobInput(i.input, i.rel));
  // Two images of one group on the same files: the group is malformed (ERR_INVALID_ARGUMENT, no retry).
  checkDistinctOutputs(out, bulk);
  const started = performance.now();
  const images: GroupImageResult[] = new Array(bulk.length);
  let encoded = 0;
  let readMs = 0;
  let writeMs = 0;
  // guardInputs: jobs come from many callers, so an output another input wrote is never replaced (the image fails, ERR_INVALID_ARGUMENT).
  for await (const o of runBulk(tower, bulk, { outputs: { ...out, guardInputs: true }, load: loadJobInput(fetch), encode: encodeOptions })) {
    readMs += o.readMs;
    if (o.status === 'encoded') {
      encoded++;
      writeMs += o.writeMs;
    }
    images[o.index] = await imageResult(o);
  }
  const transientImage = images.find((r) => r.error && !isPermanent(r.error.code));
  const transient = transientImage?.error ? new TesseraError(transientImage.error.code, `${transientImage.input}: ${transientImage.error.message}`) : undefined;
  return {
    images,
    ...(transient ? { transient } : {}),
    encoded,
    timings: { fetchMs: readMs, encodeMs: Math.max(0, performance.now() - started - readMs - writeMs), writeMs },
  };
}
