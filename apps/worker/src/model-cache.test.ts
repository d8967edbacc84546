import { describe, expect, test } from '@jest/globals';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { blake3Hex, type BlobStore } from '#libs/storage';
import { ModelCache, ModelVerificationError } from './model-cache.js';

/** A blob store holding some buffers; `reads` counts downloads; `corrupt` serves other bytes for a hash. */
function memoryStore(blobs: Buffer[]) {
  const byHash = new Map(blobs.map((b) => [blake3Hex(b), b]));
  const state = { reads: 0, corrupt: new Set<string>() };
  const store = {
    read: async (hash: string) => {
      state.reads++;
      const bytes = byHash.get(hash);
      if (!bytes) throw new Error('no such blob');
      const served = state.corrupt.has(hash) ? Buffer.from(bytes).fill(7, 0, 4) : bytes;
      // Small chunks: the cache must stream, never take the file in one piece.
      return Readable.from((function* () {
        for (let i = 0; i < served.length; i += 1000) yield served.subarray(i, i + 1000);
      })());
    },
  } as unknown as BlobStore;
  return { store, state };
}

const blob = (n: number, fill: number) => Buffer.alloc(n, fill);
const dir = () => mkdtempSync(path.join(tmpdir(), 'model-cache-'));

describe('ModelCache', () => {
  test('downloads a blob once, verified, read-only, and serves it from disk after', async () => {
    const a = blob(5000, 1);
    const { store, state } = memoryStore([a]);
    const cache = new ModelCache(store, { dir: dir(), maxBytes: 1e6 });
    const [one, two] = await Promise.all([cache.acquire(blake3Hex(a), a.length), cache.acquire(blake3Hex(a), a.length)]);
    expect(state.reads).toBe(1);
    expect(one.path).toBe(two.path);
    expect(readFileSync(one.path).equals(a)).toBe(true);
    expect(statSync(one.path).mode & 0o222).toBe(0);
    one.release();
    two.release();
    const three = await cache.acquire(blake3Hex(a), a.length);
    expect(state.reads).toBe(1);
    three.release();
  });

  test('never keeps bytes that do not hash to their name or have another size', async () => {
    const a = blob(3000, 2);
    const { store, state } = memoryStore([a]);
    state.corrupt.add(blake3Hex(a));
    const cache = new ModelCache(store, { dir: dir(), maxBytes: 1e6 });
    await expect(cache.acquire(blake3Hex(a), a.length)).rejects.toBeInstanceOf(ModelVerificationError);
    expect(cache.has(blake3Hex(a))).toBe(false);
    state.corrupt.clear();
    await expect(cache.acquire(blake3Hex(a), a.length + 1)).rejects.toBeInstanceOf(ModelVerificationError);
    await expect(cache.acquire(blake3Hex(a), a.length - 1)).rejects.toThrow();
    expect(cache.usage().files).toBe(0);
    expect(existsSync(cache.pathOf(blake3Hex(a)))).toBe(false);
  });

  test('evicts the least recently used files no job holds to stay within its budget', async () => {
    const [a, b, c] = [blob(4000, 1), blob(4000, 2), blob(4000, 3)];
    const { store } = memoryStore([a, b, c]);
    const cache = new ModelCache(store, { dir: dir(), maxBytes: 9000 });
    (await cache.acquire(blake3Hex(a), 4000)).release();
    const heldB = await cache.acquire(blake3Hex(b), 4000);
    // a is older and idle: it makes room for c; b is held.
    (await cache.acquire(blake3Hex(c), 4000)).release();
    expect([cache.has(blake3Hex(a)), cache.has(blake3Hex(b)), cache.has(blake3Hex(c))]).toEqual([false, true, true]);
    expect(cache.usage().bytes).toBeLessThanOrEqual(9000);
    // Touching b makes c the least recent.
    heldB.release();
    (await cache.acquire(blake3Hex(b), 4000)).release();
    (await cache.acquire(blake3Hex(a), 4000)).release();
    expect([cache.has(blake3Hex(a)), cache.has(blake3Hex(b)), cache.has(blake3Hex(c))]).toEqual([true, true, false]);
  });

  test('a file evicted while held goes when its job releases it; deleted blobs are dropped on a check', async () => {
    const [a, b] = [blob(100, 1), blob(100, 2)];
    const { store } = memoryStore([a, b]);
    const cache = new ModelCache(store, { dir: dir(), maxBytes: 1e6 });
    const held = await cache.acquire(blake3Hex(a), 100);
    (await cache.acquire(blake3Hex(b), 100)).release();
    await cache.evict(blake3Hex(a));
    expect(existsSync(held.path)).toBe(true);
    held.release();
    await new Promise((r) => setTimeout(r, 20));
    expect(existsSync(held.path)).toBe(false);
    expect(await cache.retainStored(async () => new Set())).toBe(1);
    expect(cache.usage()).toEqual({ files: 0, bytes: 0 });
  });

  test('a new process finds the files an earlier one left, and none of its half downloads', async () => {
    const a = blob(700, 9);
    const { store, state } = memoryStore([a]);
    const where = dir();
    (await new ModelCache(store, { dir: where, maxBytes: 1e6 }).acquire(blake3Hex(a), 700)).release();
    writeFileSync(path.join(where, 'tmp', 'partial'), 'x');
    const again = new ModelCache(store, { dir: where, maxBytes: 1e6 });
    await again.open();
    expect(again.usage()).toEqual({ files: 1, bytes: 700 });
    expect(existsSync(path.join(where, 'tmp', 'partial'))).toBe(false);
    (await again.acquire(blake3Hex(a), 700)).release();
    expect(state.reads).toBe(1);
  });
});
