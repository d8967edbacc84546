import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { blake3Hex } from './blake3.js';
import { TooLargeError } from './limits.js';
import { LocalBlobStore } from './local-store.js';
import { StorageUnavailableError } from './unavailable.js';

describe('LocalBlobStore', () => {
  let dir: string;
  let store: LocalBlobStore;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'local-store-'));
    store = new LocalBlobStore(path.join(dir, 'blobs'), 'secret-0123456789', '');
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const readAll = async (hash: string, range?: { start: number; end: number }) => Buffer.concat(await (await store.read(hash, range)).toArray());

  it('stores a file from the disk byte for byte under its blake3, once', async () => {
    // Several read pieces and an odd tail, so the hash runs over more than one piece.
    const bytes = randomBytes(3 * 1024 * 1024 + 123);
    const file = path.join(dir, 'out.bin');
    await writeFile(file, bytes);

    const first = await store.putFile(file);
    expect(first).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    expect((await readAll(first.hash)).equals(bytes)).toBe(true);
    // The same bytes again, from a file or a stream: found, not created.
    expect(await store.putFile(file)).toMatchObject({ hash: first.hash, created: false });
    expect(await store.put(Readable.from([bytes]))).toMatchObject({ hash: first.hash, created: false });
    // The source file is left as it was, and no temporary copy stays behind.
    expect((await readFile(file)).equals(bytes)).toBe(true);
    expect(await readdir(path.join(dir, 'blobs', 'tmp'))).toEqual([]);
  });

  it('refuses a file over the limit before copying it', async () => {
    const file = path.join(dir, 'big.bin');
    await writeFile(file, randomBytes(2048));
    await expect(store.putFile(file, { maxBytes: 1024 })).rejects.toBeInstanceOf(TooLargeError);
    expect(await readdir(path.join(dir, 'blobs', 'tmp'))).toEqual([]);
  });

  it('stores a streamed body in network-sized pieces byte for byte, and refuses one over the limit keeping nothing', async () => {
    // More than a few write batches, in 64 KiB pieces with an odd tail.
    const bytes = randomBytes(3 * 1024 * 1024 + 4321);
    const pieces = (b: Buffer) => Readable.from(Array.from({ length: Math.ceil(b.length / 65536) }, (_, i) => b.subarray(i * 65536, (i + 1) * 65536)));
    const stored = await store.put(pieces(bytes));
    expect(stored).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    expect((await readAll(stored.hash)).equals(bytes)).toBe(true);

    const over = pieces(randomBytes(2 * 1024 * 1024));
    await expect(store.put(over, { maxBytes: 1024 * 1024 })).rejects.toBeInstanceOf(TooLargeError);
    expect(over.destroyed).toBe(true);
    expect(await readdir(path.join(dir, 'blobs', 'tmp'))).toEqual([]);
  });

  it('stores bytes from memory under their blake3, once, as a stream of them would be', async () => {
    const bytes = randomBytes(70_000);
    const first = await store.putBytes(bytes);
    expect(first).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    expect((await readAll(first.hash)).equals(bytes)).toBe(true);
    expect(await store.putBytes(bytes)).toMatchObject({ hash: first.hash, created: false });
    // No lookup to skip here: the link says the bytes were there.
    expect(await store.putBytes(bytes, { skipLookup: true })).toMatchObject({ hash: first.hash, created: false });
    expect(await store.put(Readable.from([bytes]))).toMatchObject({ hash: first.hash, created: false });
    expect(await store.putBytes(Buffer.alloc(0))).toMatchObject({ hash: blake3Hex(Buffer.alloc(0)), sizeBytes: 0, created: true });
    await expect(store.putBytes(randomBytes(2048), { maxBytes: 1024 })).rejects.toBeInstanceOf(TooLargeError);
    expect(await readdir(path.join(dir, 'blobs', 'tmp'))).toEqual([]);
  });

  it('says the store is unavailable when bytes from memory cannot be written', async () => {
    // A file where the store's folder should be: nothing can be created under it.
    const blocked = new LocalBlobStore(path.join(dir, 'not-a-folder'), 'secret-0123456789', '');
    await writeFile(path.join(dir, 'not-a-folder'), 'x');
    await expect(blocked.putBytes(randomBytes(100))).rejects.toBeInstanceOf(StorageUnavailableError);
  });

  it('serves ranges and whole files read in large pieces', async () => {
    const bytes = randomBytes(700 * 1024);
    const { hash } = await store.put(Readable.from([bytes.subarray(0, 65536), bytes.subarray(65536)]));
    expect((await readAll(hash)).equals(bytes)).toBe(true);
    expect((await readAll(hash, { start: 300_000, end: 600_000 })).equals(bytes.subarray(300_000, 600_001))).toBe(true);
  });
});
