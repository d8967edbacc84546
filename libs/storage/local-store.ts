import { randomUUID } from 'node:crypto';
import { linkSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { copyFile, link, mkdir, open, stat, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { blake3File, blake3Hex, isBlake3Hex } from './blake3.js';
import { blobKey, type BlobStore, type ByteRange, type PutBytesOptions, type SignedUrl, type SignOptions, type StoredBlob } from './blob-store.js';
import { drain } from './drain.js';
import { HashedFileSink } from './hashed-file-sink.js';
import { signBlobUrl } from './signing.js';
import { TooLargeError } from './limits.js';
import { StorageUnavailableError } from './unavailable.js';

const PROBE_BYTES = Buffer.alloc(4096);
// Reads of this size halve the time to serve a 5 MB file against the 64 KiB default (fewer reads
// and socket writes); one such piece is held per download in flight.
const READ_PIECE_BYTES = 256 * 1024;
// A file stored from the disk is hashed in pieces of this size.
const FILE_PIECE_BYTES = 1024 * 1024;

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
    ]).then(
      () => undefined,
      (err: unknown) => {
        // Tried again next time: a disk that was full or read-only at start may be fixed since.
        this.ready = null;
        throw err;
      },
    );
    return this.ready;
  }

  async put(body: Readable, options: { maxBytes?: number } = {}): Promise<StoredBlob> {
    const tmp = path.join(this.root, 'tmp', randomUUID());
    let file: FileHandle;
    try {
      await this.ensureDirs();
      file = await open(tmp, 'w');
    } catch (err) {
      await drain(body);
      throw new StorageUnavailableError(err);
    }
    try {
      const sink = new HashedFileSink(file, options.maxBytes);
      // A failing client stream, or one over the limit, stops the file; a failing disk does not
      // stop the client's stream (see HashedFileSink).
      let closing: unknown = null;
      try {
        await pipeline(body, sink);
      } finally {
        closing = await file.close().then(() => null, (err: unknown) => err);
      }
      const diskError = sink.diskError ?? closing;
      if (diskError) throw new StorageUnavailableError(diskError);
      return await this.keep(tmp, sink.digest(), sink.size);
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  /**
   * The kernel copies the file (copy_file_range, or a reflink where the file system has them)
   * while this process reads it once for its hash: a large output is not passed through the
   * process twice. Its size, modification time and inode are compared before and after, so bytes
   * changed meanwhile are never stored under a hash they do not have.
   */
  async putFile(file: string, options: { maxBytes?: number } = {}): Promise<StoredBlob> {
    try {
      await this.ensureDirs();
    } catch (err) {
      throw new StorageUnavailableError(err);
    }
    const before = await stat(file);
    if (options.maxBytes !== undefined && before.size > options.maxBytes) throw new TooLargeError(options.maxBytes);
    const tmp = path.join(this.root, 'tmp', randomUUID());
    try {
      const [hashed] = await Promise.all([
        blake3File(file, FILE_PIECE_BYTES),
        copyFile(file, tmp).catch((err: unknown) => {
          throw new StorageUnavailableError(err);
        }),
      ]);
      const after = await stat(file);
      if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || after.ino !== before.ino || hashed.size !== before.size) {
        throw new Error(`${path.basename(file)} changed while it was being stored`);
      }
      return await this.keep(tmp, hashed.hash, hashed.size);
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  /**
   * Synchronous calls: a small output's copy is a few system calls, each cheaper than the trip to
   * the thread pool and back that an asynchronous call makes of it (five trips, about 1.5 ms of a
   * small job on a 2-core VM).
   */
  // `skipLookup` changes nothing here: the link that keeps the bytes says whether they were new.
  async putBytes(bytes: Buffer, options: PutBytesOptions = {}): Promise<StoredBlob> {
    if (options.maxBytes !== undefined && bytes.length > options.maxBytes) throw new TooLargeError(options.maxBytes);
    const hash = blake3Hex(bytes);
    const tmp = path.join(this.root, 'tmp', randomUUID());
    try {
      await this.ensureDirs();
      writeFileSync(tmp, bytes, { flag: 'wx' });
      return this.filed(hash, bytes.length, linkSyncError(tmp, this.pathOf(hash)));
    } catch (err) {
      throw err instanceof StorageUnavailableError ? err : new StorageUnavailableError(err);
    } finally {
      // Also after a write that failed part way (a full disk): no temporary file is left behind.
      try {
        unlinkSync(tmp);
      } catch {
        // never created, or already gone
      }
    }
  }

  /** Files the written bytes under their hash (the temporary file is the caller's to remove). */
  private async keep(tmp: string, hash: string, sizeBytes: number): Promise<StoredBlob> {
    const linked = await link(tmp, this.pathOf(hash)).then(() => null, (err: NodeJS.ErrnoException) => err);
    return this.filed(hash, sizeBytes, linked);
  }

  /** link() fails when the target exists, so two writers of the same bytes cannot both "create" it. */
  private filed(hash: string, sizeBytes: number, linkError: NodeJS.ErrnoException | null): StoredBlob {
    if (linkError && linkError.code !== 'EEXIST') throw new StorageUnavailableError(linkError);
    return { hash, sizeBytes, storageKey: blobKey(hash), created: linkError === null };
  }

  /**
   * Asked right after a record of bytes just written (in the page cache): a synchronous look
   * costs microseconds where a trip to the thread pool and back costs a fraction of a millisecond.
   */
  async has(hash: string): Promise<boolean> {
    if (!isBlake3Hex(hash)) return false;
    try {
      return statSync(this.pathOf(hash)).isFile();
    } catch {
      return false;
    }
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
    // Opened here, so a missing blob throws now rather than from the stream; one trip to the
    // thread pool where a look first and an open later made two.
    const handle = await open(this.pathOf(hash), 'r');
    return handle.createReadStream({ highWaterMark: READ_PIECE_BYTES, ...(range ? { start: range.start, end: range.end } : {}) });
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

  async probeWrite(): Promise<void> {
    await this.ensureDirs();
    // Beside the uploads' own temporary files, so it fails when they would; a page of bytes, so a
    // disk with a few bytes left does not pass for one with room.
    const probe = path.join(this.root, 'tmp', `probe-${randomUUID()}`);
    try {
      await writeFile(probe, PROBE_BYTES);
    } finally {
      await unlink(probe).catch(() => undefined);
    }
  }
}

/** linkSync's failure as a value, as `keep` has link's: null when the link was made. */
function linkSyncError(existing: string, target: string): NodeJS.ErrnoException | null {
  try {
    linkSync(existing, target);
    return null;
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
}
