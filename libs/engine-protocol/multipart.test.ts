import { describe, expect, test } from '@jest/globals';
import { Readable, Writable } from 'node:stream';
import { buildMultipartBody } from './multipart.js';

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks).toString('latin1');
}

describe('multipart bodies for the engine', () => {
  test('fields first, then each file with its name, filename and media type', async () => {
    async function* pieces() {
      yield new Uint8Array([0x41, 0x42]);
      yield new Uint8Array([0x43]);
    }
    const body = buildMultipartBody(
      [{ name: 'type', value: 'input' }, { name: 'original_ref', value: '{"filename":"a.png"}' }],
      [
        { name: 'image', filename: 'pic.png', contentType: 'image/png', data: Readable.from([Buffer.from('abc'), Buffer.from('def')]) },
        { name: 'other', filename: 'b.bin', contentType: 'application/octet-stream', data: pieces() },
      ],
    );
    const b = body.boundary;
    expect(body.contentType).toBe(`multipart/form-data; boundary=${b}`);
    expect(await text(body.stream)).toBe(
      `--${b}\r\nContent-Disposition: form-data; name="type"\r\n\r\ninput\r\n` +
        `--${b}\r\nContent-Disposition: form-data; name="original_ref"\r\n\r\n{"filename":"a.png"}\r\n` +
        `--${b}\r\nContent-Disposition: form-data; name="image"; filename="pic.png"\r\nContent-Type: image/png\r\n\r\nabcdef\r\n` +
        `--${b}\r\nContent-Disposition: form-data; name="other"; filename="b.bin"\r\nContent-Type: application/octet-stream\r\n\r\nABC\r\n` +
        `--${b}--\r\n`,
    );
  });

  test('a file is read only as fast as the body is taken, and released when the body is destroyed', async () => {
    let produced = 0;
    async function* gibibyte() {
      for (; produced < 1024 ** 3; produced += 16 * 1024) yield Buffer.alloc(16 * 1024);
    }
    const source = Readable.from(gibibyte());
    const closed = new Promise((resolve) => source.once('close', resolve));
    const body = buildMultipartBody([{ name: 'type', value: 'input' }], [{ name: 'image', filename: 'big.bin', contentType: 'application/octet-stream', data: source }]);
    let taken = 0;
    body.stream.pipe(new Writable({ highWaterMark: 1024, write: (chunk: Buffer, _enc, done) => ((taken += chunk.length), setTimeout(done, 1)) }));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(taken).toBeGreaterThan(0);
    expect(produced - taken).toBeLessThan(1024 ** 2);
    body.stream.destroy();
    await closed;
  });

  test('a file whose source fails fails the body', async () => {
    const source = new Readable({ read: () => source.destroy(new Error('the store broke off')) });
    const body = buildMultipartBody([], [{ name: 'image', filename: 'x.png', contentType: 'image/png', data: source }]);
    await expect(text(body.stream)).rejects.toThrow('the store broke off');
  });
});
