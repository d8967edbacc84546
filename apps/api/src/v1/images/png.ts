// A small PNG reader and writer on node:zlib, enough for v1's mask upload: read any standard PNG
// (all colour types and bit depths, interlaced or not) into 8-bit RGBA, write 8-bit RGBA.
import { crc32, deflateSync, inflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Decoding stops here: bigger images are refused before any large allocation. */
export const MAX_PIXELS = 8192 * 8192;

export class ImageDecodeError extends Error {}

export interface RgbaImage {
  width: number;
  height: number;
  /** width * height * 4 bytes, row by row. */
  rgba: Uint8Array;
  /** tEXt / iTXt / zTXt metadata, in file order. */
  text: Array<[string, string]>;
}

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && Buffer.from(bytes.buffer, bytes.byteOffset, 8).equals(SIGNATURE);
}

interface Header {
  width: number;
  height: number;
  depth: number;
  colorType: number;
  interlace: number;
}

const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };
const VALID_DEPTHS: Record<number, number[]> = { 0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16] };

// Adam7 passes: x0, y0, dx, dy.
const ADAM7 = [
  [0, 0, 8, 8],
  [4, 0, 8, 8],
  [0, 4, 4, 8],
  [2, 0, 4, 4],
  [0, 2, 2, 4],
  [1, 0, 2, 2],
  [0, 1, 1, 2],
] as const;

export function decodePng(input: Uint8Array): RgbaImage {
  const buf = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (!isPng(buf)) throw new ImageDecodeError('not a PNG file');
  let header: Header | null = null;
  let palette: Buffer | null = null;
  let trns: Buffer | null = null;
  const idat: Buffer[] = [];
  const text: Array<[string, string]> = [];
  let pos = 8;
  while (pos + 12 <= buf.length) {
    const length = buf.readUInt32BE(pos);
    const type = buf.toString('latin1', pos + 4, pos + 8);
    if (pos + 12 + length > buf.length) throw new ImageDecodeError('truncated PNG chunk');
    const data = buf.subarray(pos + 8, pos + 8 + length);
    pos += 12 + length;
    if (type === 'IHDR') {
      if (length < 13) throw new ImageDecodeError('bad PNG header');
      header = { width: data.readUInt32BE(0), height: data.readUInt32BE(4), depth: data[8]!, colorType: data[9]!, interlace: data[12]! };
    } else if (type === 'PLTE') palette = data;
    else if (type === 'tRNS') trns = data;
    else if (type === 'IDAT') idat.push(data);
    else if (type === 'tEXt' || type === 'zTXt' || type === 'iTXt') {
      const entry = readText(type, data);
      if (entry) text.push(entry);
    } else if (type === 'IEND') break;
  }
  if (!header || idat.length === 0) throw new ImageDecodeError('PNG without image data');
  const { width, height, depth, colorType, interlace } = header;
  if (!width || !height || width * height > MAX_PIXELS) throw new ImageDecodeError(`PNG size ${width}x${height} is not supported`);
  if (!VALID_DEPTHS[colorType]?.includes(depth) || interlace > 1) throw new ImageDecodeError('unsupported PNG format');
  if (colorType === 3 && !palette) throw new ImageDecodeError('palette PNG without palette');
  const channels = CHANNELS[colorType]!;
  const bitsPerPixel = channels * depth;
  const passes = interlace === 1 ? ADAM7.map(([x0, y0, dx, dy]) => ({ x0, y0, dx, dy })) : [{ x0: 0, y0: 0, dx: 1, dy: 1 }];
  let expected = 0;
  for (const p of passes) {
    const w = Math.ceil((width - p.x0) / p.dx);
    const h = Math.ceil((height - p.y0) / p.dy);
    if (w > 0 && h > 0) expected += h * (1 + Math.ceil((w * bitsPerPixel) / 8));
  }
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.concat(idat), { maxOutputLength: expected + 1 });
  } catch {
    throw new ImageDecodeError('corrupt PNG image data');
  }
  if (raw.length < expected) throw new ImageDecodeError('truncated PNG image data');

  const rgba = new Uint8Array(width * height * 4);
  const sample = sampleReader(colorType, depth, palette, trns);
  let offset = 0;
  for (const p of passes) {
    const w = Math.ceil((width - p.x0) / p.dx);
    const h = Math.ceil((height - p.y0) / p.dy);
    if (w <= 0 || h <= 0) continue;
    const stride = Math.ceil((w * bitsPerPixel) / 8);
    const rows = unfilter(raw.subarray(offset, offset + h * (stride + 1)), h, stride, Math.max(1, bitsPerPixel >> 3));
    offset += h * (stride + 1);
    for (let y = 0; y < h; y++) {
      const row = rows.subarray(y * stride, (y + 1) * stride);
      for (let x = 0; x < w; x++) {
        const at = ((p.y0 + y * p.dy) * width + (p.x0 + x * p.dx)) * 4;
        sample(row, x, rgba, at);
      }
    }
  }
  return { width, height, rgba, text };
}

function readText(type: string, data: Buffer): [string, string] | null {
  const zero = data.indexOf(0);
  if (zero <= 0) return null;
  const key = data.toString('latin1', 0, zero);
  try {
    if (type === 'tEXt') return [key, data.toString('latin1', zero + 1)];
    if (type === 'zTXt') return [key, inflateSync(data.subarray(zero + 2), { maxOutputLength: 8 << 20 }).toString('latin1')];
    // iTXt: keyword, 0, compressed flag, method, language tag, 0, translated keyword, 0, text
    const compressed = data[zero + 1] === 1;
    const langEnd = data.indexOf(0, zero + 3);
    const transEnd = langEnd < 0 ? -1 : data.indexOf(0, langEnd + 1);
    if (transEnd < 0) return null;
    const body = data.subarray(transEnd + 1);
    return [key, (compressed ? inflateSync(body, { maxOutputLength: 8 << 20 }) : body).toString('utf8')];
  } catch {
    return null;
  }
}

function unfilter(data: Buffer, height: number, stride: number, bpp: number): Uint8Array {
  const out = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = data[y * (stride + 1)]!;
    const line = data.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = y * stride;
    const prev = cur - stride;
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? out[cur + x - bpp]! : 0;
      const b = y > 0 ? out[prev + x]! : 0;
      const c = y > 0 && x >= bpp ? out[prev + x - bpp]! : 0;
      let v = line[x]!;
      if (filter === 1) v += a;
      else if (filter === 2) v += b;
      else if (filter === 3) v += (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      } else if (filter !== 0) throw new ImageDecodeError(`bad PNG filter ${filter}`);
      out[cur + x] = v & 0xff;
    }
  }
  return out;
}

type SampleWriter = (row: Uint8Array, x: number, out: Uint8Array, at: number) => void;

/** Reads pixel x of an unfiltered row and writes it as 8-bit RGBA. */
function sampleReader(colorType: number, depth: number, palette: Buffer | null, trns: Buffer | null): SampleWriter {
  const channels = CHANNELS[colorType]!;
  const max = (1 << Math.min(depth, 8)) - 1;
  // One sample, scaled to 8 bits (16-bit samples keep their high byte).
  const get = (row: Uint8Array, index: number): number => {
    if (depth === 8) return row[index]!;
    if (depth === 16) return row[index * 2]!;
    const perByte = 8 / depth;
    const byte = row[Math.floor(index / perByte)]!;
    const shift = 8 - depth * ((index % perByte) + 1);
    return (byte >> shift) & max;
  };
  const raw16 = (row: Uint8Array, index: number): number => (depth === 16 ? (row[index * 2]! << 8) | row[index * 2 + 1]! : get(row, index));
  const scale = (v: number) => (depth >= 8 ? v : Math.round((v * 255) / max));
  switch (colorType) {
    case 0: {
      const key = trns && trns.length >= 2 ? trns.readUInt16BE(0) : -1;
      return (row, x, out, at) => {
        const g = scale(get(row, x));
        out[at] = out[at + 1] = out[at + 2] = g;
        out[at + 3] = raw16(row, x) === key ? 0 : 255;
      };
    }
    case 2: {
      const key = trns && trns.length >= 6 ? [trns.readUInt16BE(0), trns.readUInt16BE(2), trns.readUInt16BE(4)] : null;
      return (row, x, out, at) => {
        for (let c = 0; c < 3; c++) out[at + c] = get(row, x * 3 + c);
        out[at + 3] = key && key.every((k, c) => raw16(row, x * 3 + c) === k) ? 0 : 255;
      };
    }
    case 3:
      return (row, x, out, at) => {
        const i = get(row, x);
        if (i * 3 + 2 >= palette!.length) throw new ImageDecodeError('PNG palette index out of range');
        out[at] = palette![i * 3]!;
        out[at + 1] = palette![i * 3 + 1]!;
        out[at + 2] = palette![i * 3 + 2]!;
        out[at + 3] = trns && i < trns.length ? trns[i]! : 255;
      };
    default:
      return (row, x, out, at) => {
        const base = x * channels;
        if (channels === 2) {
          out[at] = out[at + 1] = out[at + 2] = get(row, base);
          out[at + 3] = get(row, base + 1);
        } else {
          for (let c = 0; c < 4; c++) out[at + c] = get(row, base + c);
        }
      };
  }
}

/** One PNG chunk: length, type, data and CRC. */
export function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** 8-bit RGBA PNG, filter type 0 on every row, with the given text metadata as tEXt/iTXt. */
export function encodePng(image: Omit<RgbaImage, 'text'> & { text?: Array<[string, string]> }, compressLevel = 4): Buffer {
  const { width, height, rgba } = image;
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 6;
  const stride = width * 4;
  const lines = Buffer.alloc((stride + 1) * height);
  for (let y = 0; y < height; y++) lines.set(rgba.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  const meta = (image.text ?? []).map(([key, value]) =>
    // Latin-1 text fits tEXt; anything else goes to iTXt as UTF-8, as Pillow does.
    [...value].every((ch) => ch.charCodeAt(0) <= 0xff)
      ? pngChunk('tEXt', Buffer.concat([Buffer.from(key, 'latin1'), Buffer.from([0]), Buffer.from(value, 'latin1')]))
      : pngChunk('iTXt', Buffer.concat([Buffer.from(key, 'latin1'), Buffer.from([0, 0, 0, 0, 0]), Buffer.from(value, 'utf8')])),
  );
  return Buffer.concat([SIGNATURE, pngChunk('IHDR', ihdr), ...meta, pngChunk('IDAT', deflateSync(lines, { level: compressLevel })), pngChunk('IEND', Buffer.alloc(0))]);
}
