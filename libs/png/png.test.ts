import { describe, expect, test } from '@jest/globals';
import { deflateSync } from 'node:zlib';
import { decodePng, encodeApng, encodePng, pngChunk, PNG_SIGNATURE, readChunks, type RawImage } from './index.js';

const u32 = (n: number) => [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
const header = (width: number, height: number, depth: number, colorType: number, interlace = 0) =>
  pngChunk('IHDR', Buffer.from([...u32(width), ...u32(height), depth, colorType, 0, 0, interlace]));

const IEND = pngChunk('IEND', Buffer.alloc(0));
const image = (channels: RawImage['channels'], seed = 1): RawImage => ({ width: 5, height: 3, channels, data: Uint8Array.from({ length: 15 * channels }, (_, i) => (i * 37 + seed) & 0xff) });

describe('decoding untrusted PNG', () => {
  test('refuses what is not a whole PNG, with the reason', () => {
    const png = encodePng(image(4));
    expect(() => decodePng(Buffer.from('GIF89a........'))).toThrow('not a PNG file');
    expect(() => decodePng(png.subarray(0, png.length - 20))).toThrow('truncated PNG chunk');
    expect(() => decodePng(Buffer.concat([PNG_SIGNATURE, IEND]))).toThrow('bad PNG header');
    expect(() => decodePng(Buffer.concat([PNG_SIGNATURE, header(2, 2, 8, 2), IEND]))).toThrow('PNG without image data');
    const badFilter = Buffer.concat([PNG_SIGNATURE, header(2, 1, 8, 0), pngChunk('IDAT', deflateSync(Buffer.from([7, 1, 2]))), IEND]);
    expect(() => decodePng(badFilter)).toThrow('cannot decode the PNG image: Unrecognised filter type - 7');
    const ihdr = readChunks(png)[0]!.data;
    const short = Buffer.concat([PNG_SIGNATURE, pngChunk('IHDR', ihdr), pngChunk('IDAT', deflateSync(Buffer.alloc(10))), IEND]);
    expect(() => decodePng(short)).toThrow('truncated PNG image data');
    const cut = Buffer.concat([PNG_SIGNATURE, pngChunk('IHDR', ihdr), pngChunk('IDAT', readChunks(png)[1]!.data.subarray(0, 12)), IEND]);
    expect(() => decodePng(cut)).toThrow('corrupt PNG image data');
    expect(() => decodePng(Buffer.concat([PNG_SIGNATURE, header(2, 2, 3, 2), pngChunk('IDAT', deflateSync(Buffer.alloc(10))), IEND]))).toThrow('unsupported PNG format');
  });

  test('refuses a size over the limit from the header, before decoding anything', () => {
    // 100000 x 100000 claimed over a few bytes of data: refused without allocating the image.
    const huge = Buffer.concat([PNG_SIGNATURE, header(100_000, 100_000, 8, 6), pngChunk('IDAT', deflateSync(Buffer.alloc(10))), IEND]);
    expect(() => decodePng(huge)).toThrow('PNG size 100000x100000 is not supported');
    const png = encodePng(image(3));
    expect(() => decodePng(png, 14)).toThrow('PNG size 5x3 is not supported');
    expect(decodePng(png, 15).width).toBe(5);
  });

  test('image data that inflates past its size is refused without being inflated whole', () => {
    const bomb = deflateSync(Buffer.alloc(256 << 20)); // 256 MiB of zeros in about 256 KiB
    for (const interlace of [0, 1]) {
      const started = performance.now();
      expect(() => decodePng(Buffer.concat([PNG_SIGNATURE, header(16, 16, 8, 2, interlace), pngChunk('IDAT', bomb), IEND]))).toThrow('corrupt PNG image data');
      // Inflating all of it takes about a second here; stopping at the image's 784 bytes, nothing.
      expect(performance.now() - started).toBeLessThan(200);
    }
  });

  test('ignores bytes after IEND and forgives a missing IEND or a damaged checksum, as the engine does', () => {
    const png = encodePng(image(4), { text: [['prompt', '{}']] });
    const expected = decodePng(png);
    const badCrc = Buffer.from(png);
    badCrc[png.length - 13] = badCrc[png.length - 13]! ^ 0xff; // the image data's CRC
    expect(decodePng(badCrc)).toEqual(expected);
    expect(decodePng(Buffer.concat([png, Buffer.from('trailing bytes of another file')]))).toEqual(expected);
    expect(decodePng(png.subarray(0, png.length - IEND.length))).toEqual(expected);
  });

  test('reads tEXt, zTXt and iTXt (plain and compressed) in file order', () => {
    const iTXt = (key: string, text: string, compressed: boolean) =>
      pngChunk('iTXt', Buffer.concat([Buffer.from(key, 'latin1'), Buffer.from([0, compressed ? 1 : 0, 0]), Buffer.from('en\0', 'latin1'), Buffer.from('\0'), compressed ? deflateSync(text) : Buffer.from(text, 'utf8')]));
    const chunks = readChunks(encodePng(image(3)));
    const body = Buffer.concat([
      PNG_SIGNATURE,
      pngChunk('IHDR', chunks[0]!.data),
      pngChunk('tEXt', Buffer.from('prompt\0{"a": 1}', 'latin1')),
      pngChunk('zTXt', Buffer.concat([Buffer.from('workflow\0\0', 'latin1'), deflateSync('{"nodes": []}')])),
      iTXt('note', 'ünïcode ✓', false),
      iTXt('more', 'zipped ✓', true),
      ...chunks.slice(1).map((c) => pngChunk(c.type, c.data)),
    ]);
    expect(decodePng(body).text).toEqual([['prompt', '{"a": 1}'], ['workflow', '{"nodes": []}'], ['note', 'ünïcode ✓'], ['more', 'zipped ✓']]);
  });

  test('tells whether the file has alpha: an alpha channel or a transparent colour', () => {
    expect(decodePng(encodePng(image(3))).hasAlpha).toBe(false);
    expect(decodePng(encodePng(image(2))).hasAlpha).toBe(true);
    const rgb = readChunks(encodePng(image(3)));
    const withKey = Buffer.concat([PNG_SIGNATURE, pngChunk('IHDR', rgb[0]!.data), pngChunk('tRNS', Buffer.from([0, 1, 0, 38, 0, 75])), ...rgb.slice(1).map((c) => pngChunk(c.type, c.data))]);
    const decoded = decodePng(withKey);
    expect(decoded.hasAlpha).toBe(true);
    expect([...decoded.rgba.subarray(0, 4)]).toEqual([1, 38, 75, 0]); // the first pixel is the key colour
  });
});

describe('encoding', () => {
  test('each channel count round-trips, with the text after the header, the same bytes every time', () => {
    for (const channels of [1, 2, 3, 4] as const) {
      const raw = image(channels);
      const png = encodePng(raw, { text: [['prompt', '{"seed": 1}'], ['note', 'ünïcode ✓']] });
      expect(png.equals(encodePng(raw, { text: [['prompt', '{"seed": 1}'], ['note', 'ünïcode ✓']] }))).toBe(true);
      expect(readChunks(png).map((c) => c.type)).toEqual(['IHDR', 'tEXt', 'iTXt', 'IDAT', 'IEND']);
      const back = decodePng(png);
      expect(back.text).toEqual([['prompt', '{"seed": 1}'], ['note', 'ünïcode ✓']]);
      for (let p = 0; p < 15; p++) {
        const px = raw.data.subarray(p * channels, (p + 1) * channels);
        const rgba = channels === 1 ? [px[0], px[0], px[0], 255] : channels === 2 ? [px[0], px[0], px[0], px[1]] : channels === 3 ? [...px, 255] : [...px];
        expect([...back.rgba.subarray(p * 4, p * 4 + 4)]).toEqual(rgba);
      }
    }
  });

  test('an animated PNG: acTL, then fcTL before each frame, IDAT first and numbered fdAT after; the first frame is its still image', () => {
    const frames = [image(3, 1), image(3, 2), image(3, 3)];
    const apng = encodeApng(frames, 4, { text: [['prompt', '{}']] });
    const chunks = readChunks(apng);
    expect(chunks.map((c) => c.type)).toEqual(['IHDR', 'tEXt', 'acTL', 'fcTL', 'IDAT', 'fcTL', 'fdAT', 'fcTL', 'fdAT', 'IEND']);
    expect(chunks[2]!.data.readUInt32BE(0)).toBe(3);
    const sequence = chunks.filter((c) => c.type === 'fcTL' || c.type === 'fdAT').map((c) => c.data.readUInt32BE(0));
    expect(sequence).toEqual([0, 1, 2, 3, 4]);
    const fctl = chunks.find((c) => c.type === 'fcTL')!.data;
    expect([fctl.readUInt32BE(4), fctl.readUInt32BE(8), fctl.readUInt16BE(20), fctl.readUInt16BE(22)]).toEqual([5, 3, 250, 1000]);
    expect(decodePng(apng).rgba).toEqual(decodePng(encodePng(frames[0]!)).rgba);
  });
});
