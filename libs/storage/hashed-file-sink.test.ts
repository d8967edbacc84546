import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { blake3Hex } from './blake3.js';
import { HashedFileSink } from './hashed-file-sink.js';
import { TooLargeError } from './limits.js';

/** A file handle whose writev takes at most `perCall` bytes a call, or fails from the `failAt`-th call on. */
function fakeFile(options: { perCall?: number; failAt?: number } = {}) {
  const written: Buffer[] = [];
  let calls = 0;
  const handle = {
    writev: async (pieces: Buffer[]) => {
      calls++;
      if (options.failAt !== undefined && calls >= options.failAt) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      const all = Buffer.concat(pieces);
      const taken = all.subarray(0, options.perCall ?? all.length);
      written.push(Buffer.from(taken));
      return { bytesWritten: taken.length, buffers: pieces };
    },
  };
  return { handle: handle as unknown as FileHandle, written: () => Buffer.concat(written), calls: () => calls };
}

const inPieces = (bytes: Buffer, size: number) => Readable.from(Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size)));

describe('HashedFileSink', () => {
  it('writes every byte in order in a few batches, and hashes and counts them', async () => {
    const bytes = randomBytes(5 * 1024 * 1024 + 17);
    const file = fakeFile();
    const sink = new HashedFileSink(file.handle);
    await pipeline(inPieces(bytes, 65536), sink);
    expect(file.written().equals(bytes)).toBe(true);
    expect(sink.digest()).toBe(blake3Hex(bytes));
    expect(sink.size).toBe(bytes.length);
    expect(sink.diskError).toBeNull();
    // Gathered to a megabyte a call, not one call per 64 KiB piece.
    expect(file.calls()).toBeLessThanOrEqual(6);
  });

  it('carries on after short writes, so no byte is lost', async () => {
    const bytes = randomBytes(2 * 1024 * 1024 + 5);
    const file = fakeFile({ perCall: 100_003 });
    const sink = new HashedFileSink(file.handle);
    await pipeline(inPieces(bytes, 65536), sink);
    expect(file.written().equals(bytes)).toBe(true);
  });

  it('reads a body to its end when the disk fails, and says why', async () => {
    const bytes = randomBytes(3 * 1024 * 1024);
    const file = fakeFile({ failAt: 2 });
    const sink = new HashedFileSink(file.handle);
    const body = inPieces(bytes, 65536);
    await pipeline(body, sink);
    expect(body.readableEnded).toBe(true);
    expect(sink.size).toBe(bytes.length);
    expect(sink.diskError?.message).toMatch(/ENOSPC/);
    // Nothing is written after the first failure.
    expect(file.calls()).toBe(2);
  });

  it('stops a body over the limit', async () => {
    const file = fakeFile();
    const body = inPieces(randomBytes(300_000), 65536);
    await expect(pipeline(body, new HashedFileSink(file.handle, 200_000))).rejects.toBeInstanceOf(TooLargeError);
    expect(body.destroyed).toBe(true);
  });
});
