import type { Readable } from 'node:stream';

export interface StoredBlob {
  hash: string;
  sizeBytes: number;
  storageKey: string;
  /** False when identical bytes were already stored: the new copy was discarded. */
  created: boolean;
}

export interface ByteRange {
  start: number;
  end: number; // inclusive
}

export interface SignOptions {
  fileName: string;
  contentType: string;
  /** Counted from the current whole second (the local store's `exp` and S3's X-Amz-Date are whole seconds). */
  expiresInSeconds: number;
  /** Scheme and authority the client used; the local store's URLs are served by the API itself. */
  origin: string;
}

export interface SignedUrl {
  url: string;
  expiresAt: Date;
}

/**
 * How long a link to a record's bytes may live: the configured lifetime, but never past the
 * record's own expiry. After that the record answers 404, and its bytes, which other records may
 * still hold, must not be served to whoever kept the link.
 */
export function linkLifetimeSeconds(ttlSeconds: number, recordExpiresAt: Date | null): number {
  if (!recordExpiresAt) return ttlSeconds;
  // The stores count a link's seconds from the current whole second, which may begin after this
  // call: counted from the next whole second to the record's last one, the link ends no later
  // than the record. (A record with under two seconds left still gets the one-second minimum.)
  const left = Math.floor(recordExpiresAt.getTime() / 1000) - Math.ceil(Date.now() / 1000);
  return Math.max(1, Math.min(ttlSeconds, left));
}

export interface PutBytesOptions {
  maxBytes?: number;
  /**
   * Write without asking first whether the store has the bytes: for bytes that are almost never
   * stored already (an engine's new output), one request to S3 instead of two on the job's path.
   * `created` is then true whenever the bytes were written, even over the same bytes.
   */
  skipLookup?: boolean;
}

/** Content-addressed bytes: written once under `blake3/<hex>`, hashed while they stream in. */
export interface BlobStore {
  readonly driver: 'local' | 's3';
  /**
   * Throws StorageUnavailableError when the store would not take the bytes; the body is then read
   * to its end (and dropped), so the client that sent it can still be answered.
   */
  put(body: Readable, options?: { maxBytes?: number }): Promise<StoredBlob>;
  /**
   * The same for a file on this machine's disk that nothing writes to any more (an engine's
   * finished output). Throws when the file changed while it was being stored.
   */
  putFile(file: string, options?: { maxBytes?: number }): Promise<StoredBlob>;
  /**
   * The same for bytes already in memory (a small output, at most a few MiB): their hash is known
   * before they are written. The local store writes them without leaving the event loop, which
   * blocks it for the write: meant for a process that serves one job at a time (a worker).
   */
  putBytes(bytes: Buffer, options?: PutBytesOptions): Promise<StoredBlob>;
  has(hash: string): Promise<boolean>;
  /** Size in bytes, or null when the blob is not stored. */
  size(hash: string): Promise<number | null>;
  read(hash: string, range?: ByteRange): Promise<Readable>;
  signedUrl(hash: string, options: SignOptions): Promise<SignedUrl>;
  delete(hash: string): Promise<void>;
  /**
   * Writes a few bytes where uploads go and deletes them; throws when the store would not take
   * them (reachable is not enough: a full disk still answers reads). See StorageWriteProbe.
   */
  probeWrite(): Promise<void>;
}

export function blobKey(hash: string): string {
  return `blake3/${hash}`;
}
