// Image bytes -> upright pixels in a layout native/image/convert.h turns into RGB8 the way PIL's
// Image.open + ImageOps.exif_transpose + convert("RGB") does (docs/models/qwen-vision.md#decode).
// sharp decodes; we ask it for the stored samples untouched (no ICC transform, no colourspace
// conversion, no 16->8-bit scaling) so that PIL's own conversion rules apply in one place, natively.
// Admission happens from the header before any pixel is decoded.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { TesseraError } from '../errors.js';
import { readRegular } from '../io/open-regular.js';

/**
 * Turns off libvips' operation cache (sharp.cache) for this process. It keeps the last 100
 * operations for reuse, which only helps when the same image is processed again; a bulk run
 * reads each image once, so the cache only adds to a long run's peak
 * (docs/decisions/0014-bulk-run-memory.md).
 * Process-wide, so only the CLI calls it: a library user may use sharp for other things.
 */
export function disableDecodeCache(): void {
  sharp.cache(false);
}

/** Default limit on decoded pixels (width x height), overridable per call. */
export const DEFAULT_MAX_INPUT_PIXELS = 100_000_000;

export type PixelFormat = 'gray8' | 'graya8' | 'rgb8' | 'rgba8' | 'cmyk8' | 'gray16' | 'graya16' | 'rgb16' | 'rgba16';

export type ImageInput = string | Buffer | Uint8Array;

export interface ImageHeader {
  format: string;
  /** Upright size (EXIF orientation applied). */
  width: number;
  height: number;
  orientation: number;
}

export interface DecodedImage extends ImageHeader {
  pixels: Uint8Array | Uint16Array;
  pixelFormat: PixelFormat;
  /**
   * GIF: the palette colour of the first frame's transparent index. libvips decodes those pixels
   * as transparent black; PIL's convert("RGB") of the P-mode frame shows this colour instead.
   */
  transparentColor?: [number, number, number];
}

export interface AdmissionOptions {
  /** Refuse images with more pixels than this (ERR_IMAGE_TOO_LARGE). Default 100 MP. */
  maxInputPixels?: number;
  /** Refuse images whose long/short side ratio exceeds this (ERR_IMAGE_ASPECT); Qwen: 200. */
  maxAspect?: number;
}

function describe(input: ImageInput): string {
  if (typeof input === 'string') return input;
  return input instanceof Uint8Array ? `<${input.byteLength}-byte buffer>` : `<${input === null ? 'null' : typeof input}>`;
}

/**
 * The most bytes an admitted image's file can need: 8 bytes per pixel (uncompressed 16-bit RGBA,
 * the widest layout a decoder here produces) plus room for metadata (ICC profiles, EXIF, XMP).
 * A larger file cannot hold an admissible image and is refused before it is read.
 */
export function maxImageFileBytes(maxInputPixels: number): number {
  return maxInputPixels * 8 + 64 * 1024 * 1024;
}

// scheme://…: what a URL looks like (a Windows drive path, C:\…, has no //).
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * The file an image string names: a path as given, or the path of a `file:` URL (as Node's fs takes
 * URL objects). Any other URL is refused by name: the library reads files and bytes, and fetching is
 * the fleet's (its workers fetch http(s) inputs under a policy: docs/fleet.md#urls). A path that looks
 * like a URL but exists as a file is still read.
 */
export function imagePathOf(input: string): string {
  if (/^file:/i.test(input)) {
    try {
      return fileURLToPath(input);
    } catch (e) {
      throw new TesseraError('ERR_INVALID_ARGUMENT', `image ${input}: not a file URL of this machine (${(e as Error).message})`);
    }
  }
  if (URL_LIKE.test(input) && !existsSync(input)) {
    throw new TesseraError('ERR_INVALID_ARGUMENT',
      `image ${input} is a URL: encode reads image files (paths or file: URLs) and bytes, not URLs; fetch it and pass its bytes, ` +
      'or enqueue it to a fleet, whose workers fetch http(s) URLs (docs/fleet.md#urls)');
  }
  return input;
}

async function bytesOf(input: ImageInput, limit: number): Promise<Buffer> {
  if (typeof input === 'string') {
    // The OS cannot take such a path (node throws a TypeError): a caller's slip, not a file's fault.
    if (input.includes('\0')) throw new TesseraError('ERR_INVALID_ARGUMENT', `image path ${JSON.stringify(input)} contains a NUL byte`);
    if (input === '') throw new TesseraError('ERR_INVALID_ARGUMENT', 'image path is empty: give a file path, bytes or pixels');
    const path = imagePathOf(input);
    const maxBytes = maxImageFileBytes(limit);
    return readRegular(path, {
      what: 'image file',
      // A missing file is the file system's answer (ERR_IO, cause ENOENT), not a decoder's.
      notFound: 'ERR_IO',
      notRegular: 'ERR_IMAGE_DECODE',
      maxBytes,
      tooLarge: (size) =>
        new TesseraError('ERR_IMAGE_TOO_LARGE', `image file ${input} is ${size} bytes, more than an image of maxInputPixels ${limit} can take (${maxBytes} bytes)`),
    });
  }
  if (input instanceof Uint8Array) return Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  throw new TesseraError('ERR_INVALID_ARGUMENT', `image input must be a file path, a Buffer or a Uint8Array, not ${input === null ? 'null' : typeof input}`);
}

function limitOf(opts: AdmissionOptions): number {
  const limit = opts.maxInputPixels ?? DEFAULT_MAX_INPUT_PIXELS;
  if (!(Number.isSafeInteger(limit) && limit > 0)) {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `maxInputPixels must be a positive integer, not ${limit}`);
  }
  return limit;
}

function decodeError(what: string, err: unknown, limit: number, meta?: sharp.Metadata): TesseraError {
  const msg = err instanceof Error ? err.message : String(err);
  if (/pixel limit/i.test(msg)) {
    // libvips's own refusal ("Input image exceeds pixel limit") names neither number.
    const size = meta?.width && meta.height ? `${meta.width}x${meta.height} = ${meta.width * meta.height} pixels` : 'its pixel count';
    return new TesseraError('ERR_IMAGE_TOO_LARGE', `${what}: ${size} exceeds the limit of ${limit} pixels (maxInputPixels) (decoder: ${msg})`, { cause: err });
  }
  return new TesseraError('ERR_IMAGE_DECODE', `${what}: cannot decode image: ${msg}`, { cause: err });
}

// sharp's constructor options shared by the header read and the decode. failOn 'error' aborts on
// truncated or corrupt pixel data (Pillow raises there too) but tolerates libjpeg's warnings
// (e.g. extraneous bytes before a marker), which Pillow also ignores.
function sharpOptions(limit: number): sharp.SharpOptions {
  return { limitInputPixels: limit, failOn: 'error', ignoreIcc: true, autoOrient: true, pages: 1, page: 0 };
}

function admit(what: string, meta: sharp.Metadata, limit: number, opts: AdmissionOptions): ImageHeader {
  // A vector image has no pixels until someone chooses a rasteriser and a size; Pillow cannot open
  // SVG at all, so HF's processors never see one and no result could be compared with theirs.
  if (meta.format === 'svg')
    throw new TesseraError('ERR_IMAGE_DECODE', `${what}: SVG is a vector format that Pillow (and so HF's image processors) cannot open; rasterise it to PNG first`);
  const orientation = meta.orientation ?? 1;
  const stored = { w: meta.width ?? 0, h: meta.height ?? 0 };
  // Multi-page images (GIF, TIFF) report one page's height as pageHeight; we decode page 0.
  if (meta.pageHeight && meta.pages && meta.pages > 1) stored.h = meta.pageHeight;
  if (!(stored.w > 0 && stored.h > 0)) throw new TesseraError('ERR_IMAGE_DECODE', `${what}: image has no pixels (${stored.w}x${stored.h})`);
  const swap = orientation >= 5 && orientation <= 8;
  const width = swap ? stored.h : stored.w;
  const height = swap ? stored.w : stored.h;
  if (width * height > limit) {
    throw new TesseraError(
      'ERR_IMAGE_TOO_LARGE',
      `${what}: ${width}x${height} = ${width * height} pixels exceeds the limit of ${limit} (maxInputPixels)`,
    );
  }
  if (opts.maxAspect !== undefined && Math.max(width, height) / Math.min(width, height) > opts.maxAspect) {
    throw new TesseraError(
      'ERR_IMAGE_ASPECT',
      `${what}: ${width}x${height} has an aspect ratio of ${(Math.max(width, height) / Math.min(width, height)).toFixed(2)}, above ${opts.maxAspect}`,
    );
  }
  return { format: meta.format ?? 'unknown', width, height, orientation };
}

/** Reads just the header: size, format, orientation; applies the admission rules. */
export async function readImageHeader(input: ImageInput, opts: AdmissionOptions = {}): Promise<ImageHeader> {
  const limit = limitOf(opts);
  const what = describe(input);
  const buf = await bytesOf(input, limit);
  return admit(what, await metadataOf(what, buf, limit), limit, opts);
}

async function metadataOf(what: string, buf: Buffer, limit: number): Promise<sharp.Metadata> {
  if (buf.byteLength === 0) throw new TesseraError('ERR_IMAGE_DECODE', `${what}: empty input`);
  try {
    // The header read has no pixel limit of its own, so that admit() refuses with the size and
    // the limit (libvips's own refusal, "Input image exceeds pixel limit", names neither).
    return await sharp(buf, { ...sharpOptions(limit), limitInputPixels: false }).metadata();
  } catch (err) {
    throw decodeError(what, err, limit);
  }
}

// How to ask sharp for the stored samples: keep the decoder's colour space (so libvips converts
// nothing) and its sample depth. Anything else (Lab, float TIFFs, ...) goes through libvips's own
// conversion to 8-bit sRGB.
function plan(meta: sharp.Metadata): { space: string; depth: 'uchar' | 'ushort'; sixteen: boolean } {
  const space = meta.space ?? 'srgb';
  if (meta.depth === 'ushort' && (space === 'rgb16' || space === 'grey16')) return { space, depth: 'ushort', sixteen: true };
  if (meta.depth === 'uchar' && (space === 'srgb' || space === 'b-w' || space === 'cmyk')) return { space, depth: 'uchar', sixteen: false };
  return { space: 'srgb', depth: 'uchar', sixteen: false };
}

function formatOf(space: string, sixteen: boolean, channels: number): PixelFormat | undefined {
  if (space === 'cmyk') return channels >= 4 ? 'cmyk8' : undefined;
  if (sixteen) return (['gray16', 'graya16', 'rgb16', 'rgba16'] as const)[channels - 1];
  return (['gray8', 'graya8', 'rgb8', 'rgba8'] as const)[channels - 1];
}

/**
 * The colour PIL shows for a GIF's transparent pixels: the palette entry (local table if the first
 * frame has one, else the global one) of the transparent index in the first frame's graphic
 * control extension. Header bytes only; undefined when there is none or the file is odd.
 */
export function gifTransparentColor(buf: Uint8Array): [number, number, number] | undefined {
  if (buf.length < 13 || buf[0] !== 0x47 || buf[1] !== 0x49 || buf[2] !== 0x46) return undefined; // "GIF"
  const tableAt = (flags: number, at: number) => (flags & 0x80 ? { at, len: 3 * (2 << (flags & 7)) } : undefined);
  const global = tableAt(buf[10]!, 13);
  let pos = 13 + (global?.len ?? 0);
  let transparent: number | undefined;
  while (pos < buf.length) {
    const b = buf[pos]!;
    if (b === 0x21) {
      // Extension: label, then sub-blocks up to a zero-length one. A graphic control extension's
      // first sub-block is 4 bytes: packed flags (bit 0: has transparency), delay (2), index.
      const label = buf[pos + 1];
      pos += 2;
      if (label === 0xf9 && buf[pos] === 4 && pos + 4 < buf.length) transparent = buf[pos + 1]! & 1 ? buf[pos + 4] : undefined;
      while (pos < buf.length && buf[pos] !== 0) pos += buf[pos]! + 1;
      pos++;
    } else if (b === 0x2c) {
      if (transparent === undefined || pos + 10 > buf.length) return undefined;
      const table = tableAt(buf[pos + 9]!, pos + 10) ?? global;
      if (!table || transparent * 3 + 3 > table.len || table.at + table.len > buf.length) return undefined;
      const at = table.at + transparent * 3;
      return [buf[at]!, buf[at + 1]!, buf[at + 2]!];
    } else return undefined;
  }
  return undefined;
}

/** libjpeg's warnings for entropy data that stops before the declared image does. */
const PREMATURE_END = /premature end/i;

/** Decodes to upright pixels after the admission checks. */
export async function decodeImage(input: ImageInput, opts: AdmissionOptions = {}): Promise<DecodedImage> {
  const limit = limitOf(opts);
  const what = describe(input);
  const buf = await bytesOf(input, limit);
  const meta = await metadataOf(what, buf, limit);
  const header = admit(what, meta, limit, opts);
  const p = plan(meta);
  const decode = async (failOn: sharp.FailOnOptions) => {
    let img = sharp(buf, { ...sharpOptions(limit), failOn });
    if (p.space === 'cmyk') img = img.pipelineColourspace('cmyk');
    img = img.toColourspace(p.space as keyof sharp.ColourspaceEnum);
    return img.raw({ depth: p.depth }).toBuffer({ resolveWithObject: true });
  };
  let data: Buffer;
  let info: sharp.OutputInfo;
  try {
    // First with warnings fatal: libjpeg only warns when the entropy data ends before the size the
    // header declares (and fills the rest with grey), which is a file that contradicts itself.
    // Other warnings (extraneous bytes before a marker, ...) Pillow ignores: decode again without.
    ({ data, info } = await decode('warning'));
  } catch (warned) {
    const msg = warned instanceof Error ? warned.message : String(warned);
    if (PREMATURE_END.test(msg))
      throw new TesseraError('ERR_IMAGE_DECODE', `${what}: the header says ${header.width}x${header.height} but the pixel data ends early (${msg.trim()})`, { cause: warned });
    try {
      ({ data, info } = await decode(sharpOptions(limit).failOn!));
    } catch (err) {
      throw decodeError(what, err, limit, meta);
    }
  }
  // CMYK+alpha arrives with 5 bands; the pixel layout is then not one native/image knows.
  const pixelFormat = formatOf(p.space, p.sixteen, info.channels);
  if (!pixelFormat || (p.space === 'cmyk' && info.channels !== 4)) {
    throw new TesseraError('ERR_IMAGE_DECODE', `${what}: unsupported pixel layout (${p.space}, ${info.channels} channels)`);
  }
  if (info.width !== header.width || info.height !== header.height) {
    throw new TesseraError('ERR_IMAGE_DECODE', `${what}: decoded ${info.width}x${info.height}, header said ${header.width}x${header.height}`);
  }
  const pixels = p.sixteen
    ? data.byteOffset % 2 === 0
      ? new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2)
      : new Uint16Array(new Uint8Array(data).buffer) // copy to an aligned buffer
    : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const transparentColor = header.format === 'gif' && pixelFormat === 'rgba8' ? gifTransparentColor(buf) : undefined;
  return { ...header, pixels, pixelFormat, ...(transparentColor ? { transparentColor } : {}) };
}
