import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, stat, unlink, utimes } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Blake3Tap, isBlake3Hex, type BlobStore } from '#libs/storage';

/** What the cache reports to whoever drives it (the worker's log). */
export type CacheLog = (level: 'info' | 'warn', msg: string, fields?: Record<string, unknown>) => void;

export interface ModelCacheOptions {
  /** The worker's own disk: files live at `<dir>/blake3/<hash>`, downloads in progress in `<dir>/tmp/`. */
  dir: string;
  /** The bytes the cache may keep; least recently used files go first when a new one needs room. */
  maxBytes: number;
  log?: CacheLog;
}

/** A cached file held for a job: not evicted until released. */
export interface CachedModel {
  hash: string;
  path: string;
  release(): void;
}

export class ModelVerificationError extends Error {}

interface Entry {
  size: number;
  lastUsed: number;
}

/**
 * A content-addressed copy of model blobs on the worker's disk, so a tenant's 2 GB checkpoint is
 * fetched once and not for every job. Each file is named by its blake3 hash, streamed from the
 * blob store through a hasher into a temporary file and moved into place only when the hash and
 * size match; concurrent requests for one hash share one download. When a new file needs room the
 * least recently used files that no running job holds are deleted, so the cache stays within its
 * budget except while the files jobs hold alone exceed it.
 *
 * Files are made read-only: the engine sees them through hard links, and a write through a link
 * would change the cached bytes themselves.
 */
export class ModelCache {
  private readonly entries = new Map<string, Entry>();
  private readonly holds = new Map<string, number>();
  /** Evictions asked for while a job held the file: carried out on release. */
  private readonly evictLater = new Set<string>();
  private readonly downloads = new Map<string, Promise<void>>();
  /** Bytes of downloads under way: they count against the budget already. */
  private incoming = 0;
  private opened: Promise<void> | null = null;
  /** Last-use times only ever grow, even within one millisecond: the order of uses is exact. */
  private clock = 0;

  constructor(
    private readonly store: BlobStore,
    private readonly options: ModelCacheOptions,
  ) {}

  private get blobsDir(): string {
    return path.join(this.options.dir, 'blake3');
  }

  private get tmpDir(): string {
    return path.join(this.options.dir, 'tmp');
  }

  pathOf(hash: string): string {
    if (!isBlake3Hex(hash)) throw new Error('invalid blob hash');
    return path.join(this.blobsDir, hash);
  }

  /** Reads what an earlier run left: its files (last use from their times) and no half downloads. */
  open(): Promise<void> {
    this.opened ??= (async () => {
      await rm(this.tmpDir, { recursive: true, force: true });
      await mkdir(this.tmpDir, { recursive: true });
      await mkdir(this.blobsDir, { recursive: true });
      for (const name of await readdir(this.blobsDir)) {
        if (!isBlake3Hex(name)) continue;
        const s = await stat(path.join(this.blobsDir, name)).catch(() => null);
        if (s?.isFile()) this.entries.set(name, { size: s.size, lastUsed: s.mtimeMs });
      }
    })();
    return this.opened;
  }

  /** Files and bytes held now. */
  usage(): { files: number; bytes: number } {
    let bytes = 0;
    for (const e of this.entries.values()) bytes += e.size;
    return { files: this.entries.size, bytes };
  }

  has(hash: string): boolean {
    return this.entries.has(hash);
  }

  /**
   * The cached file of a blob of `sizeBytes` (or of the size the function reads, asked only when
   * the file must be fetched), downloaded first if missing, held until `release()`. A blob whose
   * bytes do not hash to its name, or have another size, is never cached (ModelVerificationError).
   */
  async acquire(hash: string, sizeBytes: number | (() => Promise<number>)): Promise<CachedModel> {
    await this.open();
    this.hold(hash);
    try {
      while (!this.entries.has(hash)) {
        let download = this.downloads.get(hash);
        if (!download) {
          download = (typeof sizeBytes === 'number' ? Promise.resolve(sizeBytes) : sizeBytes()).then((size) => this.download(hash, size)).finally(() => this.downloads.delete(hash));
          this.downloads.set(hash, download);
        }
        await download;
      }
      const entry = this.entries.get(hash)!;
      entry.lastUsed = this.tick();
      // The order survives a restart through the file's time; a failure costs only that.
      const now = new Date();
      void utimes(this.pathOf(hash), now, now).catch(() => undefined);
    } catch (err) {
      this.unhold(hash);
      throw err;
    }
    let released = false;
    return {
      hash,
      path: this.pathOf(hash),
      release: () => {
        if (released) return;
        released = true;
        this.unhold(hash);
      },
    };
  }

  private tick(): number {
    this.clock = Math.max(Date.now(), this.clock + 1);
    return this.clock;
  }

  private hold(hash: string): void {
    this.holds.set(hash, (this.holds.get(hash) ?? 0) + 1);
  }

  private unhold(hash: string): void {
    const left = (this.holds.get(hash) ?? 1) - 1;
    if (left > 0) {
      this.holds.set(hash, left);
      return;
    }
    this.holds.delete(hash);
    if (this.evictLater.delete(hash)) void this.evict(hash).catch(() => undefined);
  }

  private async download(hash: string, sizeBytes: number): Promise<void> {
    await this.makeRoom(sizeBytes);
    const tmp = path.join(this.tmpDir, randomUUID());
    const tap = new Blake3Tap(sizeBytes);
    this.incoming += sizeBytes;
    try {
      await pipeline(await this.store.read(hash), tap, createWriteStream(tmp));
      const digest = tap.digest();
      if (digest !== hash || tap.size !== sizeBytes) {
        throw new ModelVerificationError(`The stored bytes of blob ${hash} do not match it (blake3 ${digest}, ${tap.size} of ${sizeBytes} bytes).`);
      }
      await chmod(tmp, 0o444);
      await rename(tmp, this.pathOf(hash));
      this.entries.set(hash, { size: sizeBytes, lastUsed: this.tick() });
      this.options.log?.('info', 'model cached', { hash, bytes: sizeBytes });
    } finally {
      this.incoming -= sizeBytes;
      await rm(tmp, { force: true }).catch(() => undefined);
    }
  }

  /** Deletes least recently used files no job holds until `incoming` more bytes fit the budget. */
  private async makeRoom(incoming: number): Promise<void> {
    let used = this.usage().bytes + this.incoming;
    if (used + incoming <= this.options.maxBytes) return;
    const idle = [...this.entries].filter(([hash]) => !this.holds.has(hash)).sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [hash, entry] of idle) {
      if (used + incoming <= this.options.maxBytes) break;
      await this.remove(hash);
      used -= entry.size;
    }
    if (used + incoming > this.options.maxBytes) {
      this.options.log?.('warn', 'model cache over its budget: the files running jobs hold exceed it', { used_bytes: used, incoming_bytes: incoming, max_bytes: this.options.maxBytes });
    }
  }

  private async remove(hash: string): Promise<void> {
    this.entries.delete(hash);
    await unlink(this.pathOf(hash)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  /**
   * Deletes a blob's file now, or once the job holding it releases it. The engine keeps whatever
   * it has open or linked until the job ends; the cache will not serve the file again.
   */
  async evict(hash: string): Promise<void> {
    if (!this.entries.has(hash)) return;
    if (this.holds.has(hash)) {
      this.evictLater.add(hash);
      return;
    }
    await this.remove(hash);
    this.options.log?.('info', 'model evicted', { hash });
  }

  /** Evicts every cached blob `stored` does not report as still stored. */
  async retainStored(stored: (hashes: string[]) => Promise<Set<string>>): Promise<number> {
    await this.open();
    const hashes = [...this.entries.keys()];
    if (hashes.length === 0) return 0;
    const alive = await stored(hashes);
    const gone = hashes.filter((h) => !alive.has(h));
    for (const hash of gone) await this.evict(hash);
    return gone.length;
  }
}
