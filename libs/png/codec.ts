// PNG pixels by pngjs (pure JS, every colour type, bit depth and interlacing). The bounds on
// untrusted input are ours: the size is checked from the header before anything is decoded, and
// the image data must inflate to exactly what that size needs (see decodePng).
import { inflateSync } from 'node:zlib';
import pngjs, { type PackerOptions } from 'pngjs';
import { afterHeader, isPng, pngChunk, readChunks, readTextChunk, textChunk } from './chunks.js';
import { PngDecodeError } from './errors.js';

const { PNG } = pngjs;

/** Decoding stops here by default: bigger images are refused before any large allocation. */
export const MAX_PIXELS = 8192 * 8192;

/** 8-bit pixels, `channels` interleaved: 1 grey, 2 grey and alpha, 3 RGB, 4 RGBA. */
export interface RawImage {
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
  data: Uint8Array;
}

export interface DecodedPng {
  width: number;
  height: number;
  /** 8-bit RGBA, width * height * 4 bytes, row by row (16-bit samples keep their high byte). */
  rgba: Buffer;
  /** Whether the file has an alpha channel or a transparent colour (tRNS). */
  hasAlpha: boolean;
  /** tEXt, zTXt and iTXt metadata, in file order. */
  text: Array<[string, string]>;
}

export interface PngEncodeOptions {
  /** zlib level 0..9 (the engine saves with 4, previews with 1). */
  compressLevel?: number;
  /** Text chunks written after the header, in order (see textChunk). */
  text?: Array<[string, string]>;
}

const COLOR_TYPE = { 1: 0, 2: 4, 3: 2, 4: 6 } as const;
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };
const VALID_DEPTHS: Record<number, number[]> = { 0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16] };
const IEND = pngChunk('IEND', Buffer.alloc(0));

// pngjs reads only these three fields of the image it writes.
const writePng = PNG.sync.write as (image: { width: number; height: number; data: Buffer }, options: PackerOptions) => Buffer;

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function highBytes(samples: Uint16Array): Buffer {
  const out = Buffer.alloc(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i]! >> 8;
  return out;
}

/**
 * The most bytes an interlaced image's data can inflate to: each of the seven passes adds at most
 * a filter byte and a partly used byte per row, and the passes have at most 2 * height + 7 rows.
 */
function interlacedBound(width: number, height: number, bitsPerPixel: number): number {
  return Math.ceil((width * height * bitsPerPixel) / 8) + 2 * (2 * height + 7);
}

/**
 * Any standard PNG (all colour types and bit depths, interlaced or not) as 8-bit RGBA. Refuses,
 * with a PngDecodeError saying why, what is not a PNG, is cut short, is larger than `maxPixels`
 * or does not decode; no image's data inflates to more than its size allows.
 */
export function decodePng(input: Uint8Array, maxPixels = MAX_PIXELS): DecodedPng {
  const bytes = asBuffer(input);
  if (!isPng(bytes)) throw new PngDecodeError('not a PNG file');
  const chunks = readChunks(bytes);
  const header = chunks[0]?.type === 'IHDR' ? chunks[0].data : null;
  if (!header || header.length < 13) throw new PngDecodeError('bad PNG header');
  const idat = chunks.filter((c) => c.type === 'IDAT').map((c) => c.data);
  if (idat.length === 0) throw new PngDecodeError('PNG without image data');
  const width = header.readUInt32BE(0);
  const height = header.readUInt32BE(4);
  if (!width || !height || width * height > maxPixels) throw new PngDecodeError(`PNG size ${width}x${height} is not supported`);
  const [depth, colorType, , , interlace] = header.subarray(8, 13);
  if (!VALID_DEPTHS[colorType!]?.includes(depth!) || interlace! > 1) throw new PngDecodeError('unsupported PNG format');
  // pngjs's synchronous reader takes image data of the wrong length badly: too short, it returns
  // bytes zlib never wrote (whatever the memory held); interlaced, it inflates without a bound.
  // So the data is inflated here first, never past the size the header allows, and must fill it.
  const bitsPerPixel = CHANNELS[colorType!]! * depth!;
  const size = interlace ? interlacedBound(width, height, bitsPerPixel) : (Math.ceil((width * bitsPerPixel) / 8) + 1) * height;
  let inflated: number;
  try {
    inflated = inflateSync(Buffer.concat(idat), { maxOutputLength: size }).length;
  } catch {
    throw new PngDecodeError('corrupt PNG image data');
  }
  if (!interlace && inflated < size) throw new PngDecodeError('truncated PNG image data');
  // A grey or RGB image's transparent colour (tRNS) is applied below, not by pngjs.
  const key = colorType === 0 || colorType === 2 ? chunks.find((c) => c.type === 'tRNS') : undefined;
  // The image ends with IEND: bytes after it are ignored, and a missing IEND is forgiven.
  const last = chunks[chunks.length - 1]!;
  const image = Buffer.concat([
    ...(key ? [bytes.subarray(0, key.end - key.data.length - 12), bytes.subarray(key.end, last.end)] : [bytes.subarray(0, last.end)]),
    ...(last.type === 'IEND' ? [] : [IEND]),
  ]);
  // 16-bit samples keep their high byte, as the engine's Pillow reads them (pngjs would round).
  // CRCs are not checked: the engine loads images with damaged checksums too (and pngjs would
  // report one as "unrecognised content at end of stream").
  const sixteenBits = depth === 16;
  let png;
  try {
    png = PNG.sync.read(image, { skipRescale: sixteenBits, checkCRC: false });
  } catch (err) {
    throw new PngDecodeError(`cannot decode the PNG image: ${(err as Error).message}`);
  }
  const samples = sixteenBits ? (png.data as unknown as Uint16Array) : png.data;
  if (key) clearKeyColour(samples, key.data, colorType === 0 ? 1 : 3, depth!);
  const rgba = sixteenBits ? highBytes(samples as Uint16Array) : png.data;
  const text = chunks.map(readTextChunk).filter((t): t is [string, string] => t !== null);
  return { width, height, rgba, hasAlpha: png.alpha || key !== undefined, text };
}

/**
 * Pixels of a tRNS key colour become transparent and keep their colour, as Pillow reads them
 * (pngjs would blacken them too). `samples` is RGBA at the file's depth (8 when under 8 bits).
 */
function clearKeyColour(samples: Uint8Array | Uint16Array, trns: Buffer, channels: 1 | 3, depth: number): void {
  if (trns.length < channels * 2) return;
  const scale = (v: number) => (depth >= 8 ? v : Math.round((v * 255) / ((1 << depth) - 1)));
  const [r, g, b] = [0, 1, 2].map((c) => scale(trns.readUInt16BE(Math.min(c, channels - 1) * 2)));
  for (let p = 0; p < samples.length; p += 4) {
    if (samples[p] === r && samples[p + 1] === g && samples[p + 2] === b) samples[p + 3] = 0;
  }
}

/** An 8-bit PNG of the image's own colour type, filter 0 on every row, with `text` after its header. */
export function encodePng(image: RawImage, opts: PngEncodeOptions = {}): Buffer {
  const colorType = COLOR_TYPE[image.channels];
  const png = writePng(
    { width: image.width, height: image.height, data: asBuffer(image.data) },
    { colorType, inputColorType: colorType, bitDepth: 8, filterType: 0, deflateLevel: opts.compressLevel ?? 4, deflateStrategy: 0 },
  );
  return afterHeader(png, (opts.text ?? []).map(([key, value]) => textChunk(key, value)));
}
