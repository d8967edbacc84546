// PNG at the level of its chunks (length, type, data, CRC): what pngjs does not do. It neither
// reads nor writes text chunks (tEXt, zTXt, iTXt) and writes no animation chunks (acTL, fcTL,
// fdAT); the engine writes both, so they are added around the library's output here. Pixels,
// filtering and compression of image data stay the library's.
import { crc32, inflateSync } from 'node:zlib';
import { PngDecodeError } from './errors.js';

export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Text held compressed (zTXt, compressed iTXt) is read up to this size. */
const MAX_TEXT_BYTES = 8 << 20;

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && Buffer.from(bytes.buffer, bytes.byteOffset, 8).equals(PNG_SIGNATURE);
}

/** One chunk: length, type, data and CRC. */
export function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(data, crc32(head.subarray(4))), 0);
  return Buffer.concat([head, data, crc]);
}

export interface Chunk {
  type: string;
  data: Buffer;
  /** Offset just past the chunk's CRC. */
  end: number;
}

/** The chunks of a PNG, up to and including IEND (bytes after it are not the image's). */
export function readChunks(png: Buffer): Chunk[] {
  const chunks: Chunk[] = [];
  let pos = PNG_SIGNATURE.length;
  while (pos + 12 <= png.length) {
    const length = png.readUInt32BE(pos);
    const type = png.toString('latin1', pos + 4, pos + 8);
    if (pos + 12 + length > png.length) throw new PngDecodeError('truncated PNG chunk');
    chunks.push({ type, data: png.subarray(pos + 8, pos + 8 + length), end: pos + 12 + length });
    pos += 12 + length;
    if (type === 'IEND') break;
  }
  return chunks;
}

/** A text chunk as Pillow writes one: tEXt when the text is Latin-1, iTXt (UTF-8) otherwise. */
export function textChunk(keyword: string, text: string): Buffer {
  const key = Buffer.from(keyword, 'latin1');
  return [...text].every((ch) => ch.charCodeAt(0) <= 0xff)
    ? pngChunk('tEXt', Buffer.concat([key, Buffer.from([0]), Buffer.from(text, 'latin1')]))
    : pngChunk('iTXt', Buffer.concat([key, Buffer.from([0, 0, 0, 0, 0]), Buffer.from(text, 'utf8')]));
}

/** The keyword and text of a tEXt, zTXt or iTXt chunk; null for another chunk or one that does not read. */
export function readTextChunk({ type, data }: Pick<Chunk, 'type' | 'data'>): [string, string] | null {
  if (type !== 'tEXt' && type !== 'zTXt' && type !== 'iTXt') return null;
  const zero = data.indexOf(0);
  if (zero <= 0) return null;
  const key = data.toString('latin1', 0, zero);
  try {
    if (type === 'tEXt') return [key, data.toString('latin1', zero + 1)];
    if (type === 'zTXt') return [key, inflateSync(data.subarray(zero + 2), { maxOutputLength: MAX_TEXT_BYTES }).toString('latin1')];
    // iTXt: keyword, 0, compressed flag, method, language tag, 0, translated keyword, 0, text
    const compressed = data[zero + 1] === 1;
    const langEnd = data.indexOf(0, zero + 3);
    const transEnd = langEnd < 0 ? -1 : data.indexOf(0, langEnd + 1);
    if (transEnd < 0) return null;
    const body = data.subarray(transEnd + 1);
    return [key, (compressed ? inflateSync(body, { maxOutputLength: MAX_TEXT_BYTES }) : body).toString('utf8')];
  } catch {
    return null;
  }
}

/** `png` with `chunks` placed right after its header (IHDR), where the engine writes its text. */
export function afterHeader(png: Buffer, chunks: Buffer[]): Buffer {
  if (chunks.length === 0) return png;
  const headerEnd = PNG_SIGNATURE.length + 12 + png.readUInt32BE(PNG_SIGNATURE.length);
  return Buffer.concat([png.subarray(0, headerEnd), ...chunks, png.subarray(headerEnd)]);
}
