import { describe, expect, test } from '@jest/globals';
import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';
import { PngPromptRewriter, rewritePngPrompt } from './png-prompt.js';
import { pngTextChunks } from '../../../test/support/media.js';

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(data, crc32(Buffer.from(type, 'latin1'))), 0);
  return Buffer.concat([head, data, crc]);
}

const text = (k: string, v: string) => chunk('tEXt', Buffer.concat([Buffer.from(k, 'latin1'), Buffer.from([0]), Buffer.from(v, 'latin1')]));
const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

async function rewrite(input: Buffer, prompt: string, piece: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (let i = 0; i < input.length; i += piece) parts.push(input.subarray(i, i + piece));
  const out: Buffer[] = [];
  for await (const c of Readable.from(parts).pipe(new PngPromptRewriter(prompt))) out.push(c as Buffer);
  return Buffer.concat(out);
}

/** Every chunk's CRC matches its type and data. */
function crcsHold(png: Buffer): boolean {
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    if (crc32(png.subarray(at + 8, at + 8 + length), crc32(png.subarray(at + 4, at + 8))) !== png.readUInt32BE(at + 8 + length)) return false;
    at += 12 + length;
  }
  return true;
}

describe('PngPromptRewriter', () => {
  const idat = chunk('IDAT', Buffer.alloc(5000, 7));
  const png = Buffer.concat([SIGNATURE, chunk('IHDR', Buffer.alloc(13, 1)), text('prompt', '{"1": {"cloud_cache_scope": "x"}}'), text('workflow', '{"w": 1}'), idat, chunk('IEND', Buffer.alloc(0))]);

  test.each([1, 7, 64, 100_000])('replaces only the prompt chunk, whatever the stream pieces (%i bytes)', async (piece) => {
    const out = await rewrite(png, '{"1": {"inputs": {}}}', piece);
    expect(pngTextChunks(out)).toEqual([
      ['prompt', '{"1": {"inputs": {}}}'],
      ['workflow', '{"w": 1}'],
    ]);
    expect(crcsHold(out)).toBe(true);
    expect(out.subarray(out.indexOf(idat))).toEqual(Buffer.concat([idat, chunk('IEND', Buffer.alloc(0))]));
  });

  test('passes anything that is not a PNG through unchanged', async () => {
    const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(await rewrite(jpeg, 'x', 3)).toEqual(jpeg);
    expect(rewritePngPrompt(jpeg, 'x')).toEqual(jpeg);
  });

  test('a whole file in memory comes out as the stream does', async () => {
    const prompt = '{"1": {"inputs": {}}}';
    expect(rewritePngPrompt(png, prompt)).toEqual(await rewrite(png, prompt, 64));
    // A file cut short mid-chunk keeps its last bytes, as the stream keeps them.
    const cut = png.subarray(0, png.length - 20);
    expect(rewritePngPrompt(cut, prompt)).toEqual(await rewrite(cut, prompt, 64));
  });
});
