/**
 * Minimal PNG encoder/decoder (8-bit, non-interlaced) on node:zlib, plus APNG.
 * Encoding is deterministic: same pixels + text chunks => same bytes.
 */
import { crc32, deflateSync, inflateSync } from 'node:zlib';

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** Raw 8-bit pixels, `channels` interleaved (1 gray, 3 RGB, 4 RGBA). */
export interface RawImage {
  width: number;
  height: number;
  channels: 1 | 2 | 3 | 4;
  data: Uint8Array;
}

export interface PngEncodeOptions {
  /** zlib level 0..9 (the engine saves with 4, previews with 1) */
  compressLevel?: number;
  /** tEXt chunks, written in order (keyword -> Latin-1 text) */
  text?: Array<[string, string]>;
}

const COLOR_TYPE: Record<number, number> = { 1: 0, 2: 4, 3: 2, 4: 6 };

function ihdr(width: number, height: number, channels: number): Buffer {
  const b = Buffer.alloc(13);
  b.writeUInt32BE(width, 0);
  b.writeUInt32BE(height, 4);
  b[8] = 8;
  b[9] = COLOR_TYPE[channels]!;
  return b;
}

function scanlines(img: RawImage): Buffer {
  const stride = img.width * img.channels;
  const out = Buffer.alloc((stride + 1) * img.height);
  for (let y = 0; y < img.height; y++) {
    out[y * (stride + 1)] = 0; // filter: none
    out.set(img.data.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
  }
  return out;
}

function textChunks(text: Array<[string, string]> | undefined): Buffer[] {
  return (text ?? []).map(([k, v]) => chunk('tEXt', Buffer.concat([Buffer.from(k, 'latin1'), Buffer.from([0]), Buffer.from(v, 'latin1')])));
}

export function encodePng(img: RawImage, opts: PngEncodeOptions = {}): Buffer {
  const idat = deflateSync(scanlines(img), { level: opts.compressLevel ?? 4 });
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', ihdr(img.width, img.height, img.channels)),
    ...textChunks(opts.text),
    chunk('IDAT', idat),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** Animated PNG: all frames share the first frame's size and channel count. */
export function encodeApng(frames: RawImage[], fps: number, opts: PngEncodeOptions = {}): Buffer {
  const first = frames[0]!;
  const actl = Buffer.alloc(8);
  actl.writeUInt32BE(frames.length, 0);
  actl.writeUInt32BE(0, 4); // loop forever
  const parts: Buffer[] = [SIGNATURE, chunk('IHDR', ihdr(first.width, first.height, first.channels)), ...textChunks(opts.text), chunk('acTL', actl)];
  let seq = 0;
  // delay as a fraction: num/den seconds per frame
  const den = 1000;
  const num = Math.max(1, Math.round(1000 / Math.max(0.01, fps)));
  frames.forEach((f, i) => {
    const fctl = Buffer.alloc(26);
    fctl.writeUInt32BE(seq++, 0);
    fctl.writeUInt32BE(first.width, 4);
    fctl.writeUInt32BE(first.height, 8);
    fctl.writeUInt16BE(num, 20);
    fctl.writeUInt16BE(den, 22);
    parts.push(chunk('fcTL', fctl));
    const data = deflateSync(scanlines(f), { level: opts.compressLevel ?? 4 });
    if (i === 0) parts.push(chunk('IDAT', data));
    else {
      const seqBuf = Buffer.alloc(4);
      seqBuf.writeUInt32BE(seq++, 0);
      parts.push(chunk('fdAT', Buffer.concat([seqBuf, data])));
    }
  });
  parts.push(chunk('IEND', Buffer.alloc(0)));
  return Buffer.concat(parts);
}

export class PngDecodeError extends Error {
  override name = 'PngDecodeError';
}

export interface DecodedPng extends RawImage {
  text: Array<[string, string]>;
}

export function isPng(buf: Buffer): boolean {
  return buf.length >= 8 && buf.subarray(0, 8).equals(SIGNATURE);
}

/** Decode an 8-bit (or 16-bit, reduced to 8) non-interlaced PNG of any color type. */
export function decodePng(buf: Buffer): DecodedPng {
  if (!isPng(buf)) throw new PngDecodeError('not a PNG file');
  let pos = 8;
  let width = 0;
  let height = 0;
  let bitDepth = 8;
  let colorType = 0;
  let interlace = 0;
  let palette: Buffer | undefined;
  let trns: Buffer | undefined;
  const idat: Buffer[] = [];
  const text: Array<[string, string]> = [];
  while (pos + 8 <= buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('latin1', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (data.length < len) throw new PngDecodeError('truncated PNG chunk');
    pos += 12 + len;
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      bitDepth = data[8]!;
      colorType = data[9]!;
      interlace = data[12]!;
    } else if (type === 'PLTE') palette = data;
    else if (type === 'tRNS') trns = data;
    else if (type === 'IDAT') idat.push(data);
    else if (type === 'tEXt') {
      const z = data.indexOf(0);
      if (z > 0) text.push([data.toString('latin1', 0, z), data.toString('latin1', z + 1)]);
    } else if (type === 'IEND') break;
  }
  if (!width || !height || idat.length === 0) throw new PngDecodeError('PNG without image data');
  if (interlace !== 0) throw new PngDecodeError('interlaced PNG is not supported');
  if (bitDepth !== 8 && bitDepth !== 16 && !(colorType === 3 || colorType === 0)) throw new PngDecodeError(`unsupported bit depth ${bitDepth}`);
  const samplesPerPixel = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 }[colorType as 0 | 2 | 3 | 4 | 6];
  if (!samplesPerPixel) throw new PngDecodeError(`unsupported color type ${colorType}`);
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.concat(idat));
  } catch (err) {
    throw new PngDecodeError(`corrupt PNG data: ${(err as Error).message}`);
  }
  const bitsPerPixel = samplesPerPixel * bitDepth;
  const stride = Math.ceil((width * bitsPerPixel) / 8);
  const bpp = Math.max(1, bitsPerPixel >> 3);
  if (raw.length < (stride + 1) * height) throw new PngDecodeError('truncated PNG data');
  const unfiltered = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = unfiltered.subarray(y * stride, (y + 1) * stride);
    const prev = y > 0 ? unfiltered.subarray((y - 1) * stride, y * stride) : undefined;
    for (let x = 0; x < stride; x++) {
      const a = x >= bpp ? out[x - bpp]! : 0;
      const b = prev ? prev[x]! : 0;
      const c = prev && x >= bpp ? prev[x - bpp]! : 0;
      let v = line[x]!;
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) >> 1; break;
        case 4: {
          const p = a + b - c;
          const pa = Math.abs(p - a);
          const pb = Math.abs(p - b);
          const pc = Math.abs(p - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw new PngDecodeError(`bad filter type ${filter}`);
      }
      out[x] = v & 0xff;
    }
  }
  // Expand to 8-bit RGB or RGBA.
  const hasAlpha = colorType === 4 || colorType === 6 || trns !== undefined;
  const channels = hasAlpha ? 4 : 3;
  const data = new Uint8Array(width * height * channels);
  const sample = (row: Buffer, idx: number): number => {
    if (bitDepth === 8) return row[idx]!;
    if (bitDepth === 16) return row[idx * 2]!;
    const perByte = 8 / bitDepth;
    const byte = row[Math.floor(idx / perByte)]!;
    const shift = 8 - bitDepth * ((idx % perByte) + 1);
    return (byte >> shift) & ((1 << bitDepth) - 1);
  };
  for (let y = 0; y < height; y++) {
    const row = unfiltered.subarray(y * stride, (y + 1) * stride);
    for (let x = 0; x < width; x++) {
      let r: number, g: number, b: number, al = 255;
      if (colorType === 3) {
        const i = sample(row, x);
        if (!palette || i * 3 + 2 >= palette.length) throw new PngDecodeError('palette index out of range');
        r = palette[i * 3]!;
        g = palette[i * 3 + 1]!;
        b = palette[i * 3 + 2]!;
        if (trns && i < trns.length) al = trns[i]!;
      } else if (colorType === 0) {
        const v = sample(row, x);
        const scaled = bitDepth < 8 ? Math.round((v * 255) / ((1 << bitDepth) - 1)) : v;
        r = g = b = scaled;
      } else if (colorType === 4) {
        r = g = b = sample(row, x * 2);
        al = sample(row, x * 2 + 1);
      } else {
        r = sample(row, x * samplesPerPixel);
        g = sample(row, x * samplesPerPixel + 1);
        b = sample(row, x * samplesPerPixel + 2);
        if (colorType === 6) al = sample(row, x * 4 + 3);
      }
      const o = (y * width + x) * channels;
      data[o] = r;
      data[o + 1] = g;
      data[o + 2] = b;
      if (channels === 4) data[o + 3] = al;
    }
  }
  return { width, height, channels, data, text };
}
