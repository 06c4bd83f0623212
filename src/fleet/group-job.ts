// A group job (docs/fleet.md#group-jobs): up to MAX_GROUP_IMAGES images with one set of options,
// encoded together by tower.encodeMany (block-major, as `tessera encode` does) and each written by
// the --out-dir writer, so every file is the one `encode --out-dir` (and an image job) writes.
//
// One image's input error (ERR_IMAGE_*, ERR_INVALID_ARGUMENT, ERR_NUMERIC) does not cost the others:
// they are written and the image is listed as failed, with its code, in the job's result. A
// transient error on any image (I/O, a fetch, out of memory) throws once the rest are written: the
// group is retried, and the retry skips every output already up to date, so nothing is done twice.
import { TesseraError, toTesseraError } from '../errors.js';
import type { EncodeOptions, VisionTower } from '../tower.js';
import { checkDistinctOutputs, isUpToDate, primaryOutput, stampInput, writeImageOutputs, type BulkInput, type InputStamp, type OutputJob } from '../bulk/index.js';
import { fetchInput, type FetchLimits } from './fetch-input.js';
import { isPermanent, type GroupImageResult, type GroupJobResult, type ParsedGroupJob } from './job.js';
import { defaultRel, existingOutput, sha256OfFile, stampOfBytes } from './job-output.js';

export interface GroupOutcome {
  images: GroupImageResult[];
  /** The first transient error among the images (the group must be retried), if any. */
  transient?: TesseraError;
  encoded: number;
  timings: Omit<GroupJobResult['timings'], 'totalMs'>;
}

interface Member {
  input: string;
  bulk: BulkInput;
  image?: string | Buffer;
  stamp?: InputStamp;
  /** A local file that could not be stamped: encoded anyway, so the image's own error names it. */
  stampError?: TesseraError;
  fetchMs: number;
  result?: GroupImageResult;
}

const failedImage = (input: string, e: unknown): GroupImageResult => {
  const err = toTesseraError(e);
  return { input, status: 'failed', error: { code: err.code, message: err.message } };
};

export async function runGroup(tower: VisionTower, out: OutputJob, encodeOptions: EncodeOptions, data: ParsedGroupJob, fetch?: FetchLimits): Promise<GroupOutcome> {
  const members: Member[] = data.inputs.map((i) => ({ input: i.input, bulk: { path: i.input, root: '', rel: i.rel ?? defaultRel(i.input) }, fetchMs: 0 }));
  // Two images of one group on the same files: the group is malformed (ERR_INVALID_ARGUMENT, no retry).
  checkDistinctOutputs(out, members.map((m) => m.bulk));

  const started = performance.now();
  for (const m of members) {
    const t0 = performance.now();
    try {
      if (/^https?:\/\//i.test(m.input)) {
        m.image = await fetchInput(m.input, fetch);
        m.stamp = stampOfBytes(m.image);
      } else {
        m.image = m.input;
        m.stamp = await stampInput(m.input, out.hashInputs).catch((e: unknown) => {
          m.stampError = toTesseraError(e);
          return undefined;
        });
      }
    } catch (e) {
      m.result = failedImage(m.input, e);
    }
    m.fetchMs = performance.now() - t0;
    if (m.stamp && (await isUpToDate(out, m.bulk, m.stamp))) m.result = await skippedImage(out, m);
  }
  const fetched = performance.now();

  const todo = members.filter((m) => !m.result);
  let writeMs = 0;
  let encoded = 0;
  if (todo.length) {
    for await (const item of tower.encodeMany(todo.map((m) => m.image!), encodeOptions)) {
      const m = todo[item.index]!;
      if (item.error) {
        // encodeMany prefixes "input <its index>": the job's own list names the image instead.
        m.result = failedImage(m.input, item.error.cause instanceof TesseraError ? item.error.cause : item.error);
        continue;
      }
      if (m.stampError) {
        m.result = failedImage(m.input, m.stampError);
        continue;
      }
      const w0 = performance.now();
      try {
        const { files } = await writeImageOutputs(out, m.bulk, item.result, m.stamp!);
        const output = primaryOutput(out, m.bulk);
        const { sha256, bytes } = await sha256OfFile(output);
        const t = item.result.timings;
        const ms = performance.now() - w0;
        m.result = {
          input: m.input,
          status: 'encoded',
          output,
          files,
          sha256,
          bytes,
          tokens: item.result.tokens,
          width: item.result.width,
          timings: { fetchMs: m.fetchMs, decodeMs: t.decodeMs, preprocessMs: t.preprocessMs, encodeMs: t.encodeMs, writeMs: ms, totalMs: m.fetchMs + t.decodeMs + t.preprocessMs + t.encodeMs + ms },
        };
        encoded++;
      } catch (e) {
        m.result = failedImage(m.input, e);
      }
      writeMs += performance.now() - w0;
    }
  }
  const images = members.map((m) => m.result!);
  const transientImage = images.find((r) => r.error && !isPermanent(r.error.code));
  const transient = transientImage?.error ? new TesseraError(transientImage.error.code, `${transientImage.input}: ${transientImage.error.message}`) : undefined;
  return {
    images,
    ...(transient ? { transient } : {}),
    encoded,
    timings: { fetchMs: fetched - started, encodeMs: performance.now() - fetched - writeMs, writeMs },
  };
}

async function skippedImage(out: OutputJob, m: Member): Promise<GroupImageResult> {
  const { tokens, width, files } = await existingOutput(out, m.bulk);
  const output = primaryOutput(out, m.bulk);
  const { sha256, bytes } = await sha256OfFile(output);
  return { input: m.input, status: 'skipped', output, files, sha256, bytes, tokens, width, timings: { fetchMs: m.fetchMs, decodeMs: 0, preprocessMs: 0, encodeMs: 0, writeMs: 0, totalMs: m.fetchMs } };
}
