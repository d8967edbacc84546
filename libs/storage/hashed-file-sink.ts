import type { FileHandle } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { Blake3Count } from './blake3.js';

// Bytes arrive in network-sized pieces (64 KiB). Written as they come, a 5 MB body takes some
// eighty trips to the thread pool, each costing more than its copy into the page cache; gathered
// to this size they take five, and the 5 MB re-host or upload is stored about 2 ms sooner.
const BATCH_BYTES = 1024 * 1024;

/**
 * Where a blob's bytes go on their way into the local store, in one pass: each piece is counted
 * (over the limit stops the stream), hashed with blake3 and written to the open temporary file in
 * batches of BATCH_BYTES. At most one batch is being written while the next one gathers, so an
 * upload holds about two batches, never the whole body.
 *
 * A write that fails (a full or read-only disk, a quota) does not fail the stream: the rest of the
 * body is still read and dropped, so the client that is sending it gets an answer instead of a
 * reset connection, and `diskError` says why nothing can be kept.
 */
export class HashedFileSink extends Writable {
  private readonly count: Blake3Count;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private failure: Error | null = null;

  constructor(
    private readonly file: FileHandle,
    maxBytes = Number.POSITIVE_INFINITY,
  ) {
    super({ highWaterMark: BATCH_BYTES });
    this.count = new Blake3Count(maxBytes);
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    const refused = this.count.add(chunk);
    if (refused || this.failure) {
      done(refused);
      return;
    }
    this.batch.push(chunk);
    this.batchBytes += chunk.length;
    if (this.batchBytes < BATCH_BYTES) done();
    else this.flush(done);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.flush(done);
  }

  private flush(done: () => void): void {
    const pieces = this.batch;
    this.batch = [];
    this.batchBytes = 0;
    if (pieces.length === 0 || this.failure) {
      done();
      return;
    }
    writeAll(this.file, pieces).then(
      () => done(),
      (err: Error) => {
        this.failure = err;
        done();
      },
    );
  }

  get size(): number {
    return this.count.size;
  }

  /** Why the bytes could not be written, once the stream has finished; null when all were. */
  get diskError(): Error | null {
    return this.failure;
  }

  /** Hex digest; call after the stream has finished. */
  digest(): string {
    return this.count.digest();
  }
}

/** writev until every byte is written: a short write (the disk filling up mid-call) is carried on, not lost. */
async function writeAll(file: FileHandle, pieces: Buffer[]): Promise<void> {
  let rest = pieces;
  while (rest.length > 0) {
    const { bytesWritten } = await file.writev(rest);
    if (bytesWritten === 0) throw new Error('the disk took none of the bytes');
    rest = after(rest, bytesWritten);
  }
}

/** The pieces less their first `n` bytes. */
function after(pieces: Buffer[], n: number): Buffer[] {
  let skip = n;
  let i = 0;
  while (i < pieces.length && skip >= pieces[i]!.length) skip -= pieces[i++]!.length;
  if (i === pieces.length) return [];
  return [pieces[i]!.subarray(skip), ...pieces.slice(i + 1)];
}
