import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { link, mkdir, stat, unlink, access } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Blake3Tap, isBlake3Hex } from './blake3.js';
import { blobKey, type BlobStore, type ByteRange, type SignedUrl, type SignOptions, type StoredBlob } from './blob-store.js';
import { signBlobUrl } from './signing.js';

/** The embedded default: blobs in a local directory, served by the API through HMAC-signed URLs. */
export class LocalBlobStore implements BlobStore {
  readonly driver = 'local' as const;
  private readonly root: string;
  private ready: Promise<void> | null = null;

  constructor(
    dir: string,
    private readonly secret: string,
    private readonly basePath: string,
  ) {
    this.root = path.resolve(dir);
  }

  private pathOf(hash: string): string {
    if (!isBlake3Hex(hash)) throw new Error('invalid blob hash');
    return path.join(this.root, blobKey(hash));
  }

  private ensureDirs(): Promise<void> {
    this.ready ??= Promise.all([
      mkdir(path.join(this.root, 'blake3'), { recursive: true }),
      mkdir(path.join(this.root, 'tmp'), { recursive: true }),
    ]).then(() => undefined);
    return this.ready;
  }

  async put(body: Readable, options: { maxBytes?: number } = {}): Promise<StoredBlob> {
    await this.ensureDirs();
    const tmp = path.join(this.root, 'tmp', randomUUID());
    const tap = new Blake3Tap(options.maxBytes);
    try {
      await pipeline(body, tap, createWriteStream(tmp));
      const hash = tap.digest();
      let created = true;
      // link() fails when the target exists, so two writers of the same bytes cannot both "create" it.
      await link(tmp, this.pathOf(hash)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
        created = false;
      });
      return { hash, sizeBytes: tap.size, storageKey: blobKey(hash), created };
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  async has(hash: string): Promise<boolean> {
    return (await this.size(hash)) !== null;
  }

  async size(hash: string): Promise<number | null> {
    if (!isBlake3Hex(hash)) return null;
    try {
      return (await stat(this.pathOf(hash))).size;
    } catch {
      return null;
    }
  }

  async read(hash: string, range?: ByteRange): Promise<Readable> {
    const file = this.pathOf(hash);
    await access(file);
    return createReadStream(file, range ? { start: range.start, end: range.end } : {});
  }

  async signedUrl(hash: string, o: SignOptions): Promise<SignedUrl> {
    const expiresAt = Math.floor(Date.now() / 1000) + o.expiresInSeconds;
    const query = signBlobUrl(this.secret, { hash, expiresAt, fileName: o.fileName, contentType: o.contentType });
    return { url: `${o.origin}${this.basePath}/blobs/${hash}?${query}`, expiresAt: new Date(expiresAt * 1000) };
  }

  async delete(hash: string): Promise<void> {
    await unlink(this.pathOf(hash)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  async ping(): Promise<void> {
    await this.ensureDirs();
    await access(this.root);
  }
}
