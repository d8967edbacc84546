import { open } from 'node:fs/promises';
import { Transform, type TransformCallback } from 'node:stream';
import { Blake3Hasher, blake3 } from '@napi-rs/blake-hash';
import { TooLargeError } from './limits.js';

/**
 * Counts and hashes the bytes of a blob on their way to storage, refusing them past a limit: what
 * every writer of a blob does to each piece (Blake3Tap in a pipeline, the local store's sink).
 */
export class Blake3Count {
  private readonly hasher = new Blake3Hasher();
  private bytes = 0;

  constructor(private readonly maxBytes = Number.POSITIVE_INFINITY) {}

  /** Takes a piece in; a TooLargeError (the piece not hashed) once the bytes pass the limit. */
  add(chunk: Buffer): TooLargeError | null {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBytes) return new TooLargeError(this.maxBytes);
    this.hasher.update(chunk);
    return null;
  }

  get size(): number {
    return this.bytes;
  }

  /** Hex digest; call after the last piece. */
  digest(): string {
    return this.hasher.digest('hex');
  }
}

/**
 * A pass-through that hashes and counts bytes on their way to storage, so a blob is hashed in the
 * same pass that writes it and is never held whole in memory.
 */
export class Blake3Tap extends Transform {
  private readonly count: Blake3Count;

  constructor(maxBytes = Number.POSITIVE_INFINITY) {
    super();
    this.count = new Blake3Count(maxBytes);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const refused = this.count.add(chunk);
    if (refused) done(refused);
    else done(null, chunk);
  }

  get size(): number {
    return this.count.size;
  }

  /** Hex digest; call after the stream has finished. */
  digest(): string {
    return this.count.digest();
  }
}

/** Hash and size of a file, read into one buffer of `pieceBytes` reused for every piece. */
export async function blake3File(file: string, pieceBytes: number): Promise<{ hash: string; size: number }> {
  const hasher = new Blake3Hasher();
  const piece = Buffer.allocUnsafe(pieceBytes);
  let size = 0;
  const handle = await open(file, 'r');
  try {
    for (;;) {
      const { bytesRead } = await handle.read(piece, 0, pieceBytes, size);
      if (bytesRead === 0) break;
      hasher.update(piece.subarray(0, bytesRead));
      size += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return { hash: hasher.digest('hex'), size };
}

export function blake3Hex(data: Buffer | string): string {
  return blake3(typeof data === 'string' ? Buffer.from(data) : data).toString('hex');
}

const HEX = /^[0-9a-f]{64}$/;

export function isBlake3Hex(value: string): boolean {
  return HEX.test(value);
}

/** Accepts `blake3:<hex>` (and bare hex), returns the hex or null when malformed. */
export function parseHashRef(value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const hex = value.startsWith('blake3:') ? value.slice(7) : value;
  const lower = hex.toLowerCase();
  return isBlake3Hex(lower) ? lower : null;
}

export function formatHashRef(hex: string): string {
  return `blake3:${hex}`;
}
