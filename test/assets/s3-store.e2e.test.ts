import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { ListObjectsV2Command, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import { blake3Hex, S3BlobStore, TooLargeError, type CopyRules, type S3Settings } from '#libs/storage';
import { PrivateS3 } from '../support/services.js';

// The S3 store's own paths against an S3-compatible server (scripts/s3-test-server.mjs, whose
// UploadPartCopy and copy limit this needs): a blob larger than one CopyObject may be is copied in
// parts, and a file is hashed first and uploaded straight under its hash.

const MiB = 1024 * 1024;
// S3's rules scaled down (5 GiB per CopyObject, parts of 5 MiB at least): a 22 MiB blob then takes
// the path a 22 GiB one takes on S3. Bodies of up to 8 MiB (one upload part) are not copied at all.
const SMALL_COPIES: CopyRules = { maxSingleCopyBytes: 10 * MiB, copyPartBytes: 5 * MiB, copyPartsInFlight: 2 };

let s3: PrivateS3;
let settings: S3Settings;
let client: S3Client;
let dir: string;

beforeAll(async () => {
  // The server refuses copies past the lowered limit as S3 refuses them past 5 GiB.
  s3 = await new PrivateS3().start({ S3RVER_MAX_COPY_BYTES: String(SMALL_COPIES.maxSingleCopyBytes) });
  settings = { endpoint: s3.endpoint, publicEndpoint: s3.endpoint, region: 'us-east-1', bucket: 'blobs-test', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', forcePathStyle: true, requestTimeoutMs: 30_000 };
  client = new S3Client({ region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
  dir = mkdtempSync(path.join(tmpdir(), 'cct-s3-store-'));
});

afterAll(async () => {
  client?.destroy();
  rmSync(dir, { recursive: true, force: true });
  await s3?.stop();
});

async function readAll(store: S3BlobStore, hash: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of await store.read(hash)) parts.push(Buffer.from(c as Buffer));
  return Buffer.concat(parts);
}

async function keysUnder(prefix: string): Promise<string[]> {
  const listed = await client.send(new ListObjectsV2Command({ Bucket: settings.bucket, Prefix: prefix }));
  return (listed.Contents ?? []).map((o) => o.Key!);
}

/** A stream of `bytes` in 1 MiB pieces, as an upload arrives. */
function streamOf(bytes: Buffer): Readable {
  return Readable.from(Array.from({ length: Math.ceil(bytes.length / MiB) }, (_, i) => bytes.subarray(i * MiB, (i + 1) * MiB)));
}

describe('S3 blob store', () => {
  it('copies a streamed blob larger than one copy may be in parts, byte for byte, leaving nothing under tmp/', async () => {
    const store = new S3BlobStore(settings, SMALL_COPIES);
    // 22 MiB and a bit: parts of 5 MiB and a last short one, as S3 allows.
    const bytes = randomBytes(22 * MiB + 12_345);
    const stored = await store.put(streamOf(bytes));
    expect(stored).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    const back = await readAll(store, stored.hash);
    expect(back.length).toBe(bytes.length);
    expect(createHash('sha256').update(back).digest('hex')).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(await keysUnder('tmp/')).toEqual([]);
    const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: settings.bucket }));
    expect(uploads.Uploads ?? []).toEqual([]);
    // The same bytes again: found under their hash, not copied again.
    expect(await store.put(streamOf(bytes))).toMatchObject({ hash: stored.hash, created: false });
  });

  it('is refused by the server when one copy is larger than allowed, as S3 refuses it', async () => {
    // What a store that always copied in one call met: a blob past the limit could not be kept.
    const oneCopy = new S3BlobStore(settings, { ...SMALL_COPIES, maxSingleCopyBytes: Number.MAX_SAFE_INTEGER });
    await expect(oneCopy.put(streamOf(randomBytes(12 * MiB)))).rejects.toThrow(/larger than the maximum allowable size for a copy source/);
    expect(await keysUnder('tmp/')).toEqual([]);
  });

  it('copies a blob within the limit in one call', async () => {
    const store = new S3BlobStore(settings, SMALL_COPIES);
    const bytes = randomBytes(9 * MiB);
    const stored = await store.put(streamOf(bytes));
    expect(stored).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    expect((await readAll(store, stored.hash)).equals(bytes)).toBe(true);
    expect(await keysUnder('tmp/')).toEqual([]);
    // A byte stream whose every piece and end are already buffered: none is lost past the first part.
    const buffered = new PassThrough({ highWaterMark: 16 * MiB });
    for (let i = 0; i < bytes.length; i += MiB) buffered.write(bytes.subarray(i, i + MiB));
    buffered.end();
    expect(await store.put(buffered)).toMatchObject({ hash: stored.hash, sizeBytes: bytes.length, created: false });
  });

  it('puts a body that ends within one upload part straight under its hash, and refuses one over the limit', async () => {
    const store = new S3BlobStore(settings, SMALL_COPIES);
    const bytes = randomBytes(3 * MiB + 1);
    const stored = await store.put(streamOf(bytes));
    expect(stored).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    expect((await readAll(store, stored.hash)).equals(bytes)).toBe(true);
    expect(await keysUnder('tmp/')).toEqual([]);
    expect(await store.put(streamOf(bytes))).toMatchObject({ hash: stored.hash, created: false });
    await expect(store.put(streamOf(bytes), { maxBytes: bytes.length - 1 })).rejects.toBeInstanceOf(TooLargeError);
    // A body that fails before its end is refused with its own error, and nothing is stored.
    const failing = new Readable({ read() {} });
    failing.push(randomBytes(1000));
    setImmediate(() => failing.destroy(new Error('client went away')));
    await expect(store.put(failing)).rejects.toThrow('client went away');
    expect(await keysUnder('tmp/')).toEqual([]);
  });

  it('writes bytes without looking them up first when told they are new, and says it wrote them', async () => {
    const store = new S3BlobStore(settings);
    const bytes = randomBytes(5000);
    // A look first would find the bytes the second time and write nothing.
    expect(await store.putBytes(bytes, { skipLookup: true })).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: 5000, created: true });
    expect(await store.putBytes(bytes, { skipLookup: true })).toMatchObject({ hash: blake3Hex(bytes), created: true });
    expect(await store.putBytes(bytes)).toMatchObject({ hash: blake3Hex(bytes), created: false });
    expect((await readAll(store, blake3Hex(bytes))).equals(bytes)).toBe(true);
    await expect(store.putBytes(bytes, { skipLookup: true, maxBytes: 4999 })).rejects.toBeInstanceOf(TooLargeError);
  });

  it('uploads a file straight under its hash, once, and refuses one over the limit', async () => {
    const store = new S3BlobStore(settings);
    // Larger than one upload part (8 MiB): a multipart upload.
    const bytes = randomBytes(9 * MiB + 7);
    const file = path.join(dir, 'video.mp4');
    writeFileSync(file, bytes);
    const stored = await store.putFile(file);
    expect(stored).toMatchObject({ hash: blake3Hex(bytes), sizeBytes: bytes.length, created: true });
    expect((await readAll(store, stored.hash)).equals(bytes)).toBe(true);
    expect(await keysUnder('tmp/')).toEqual([]);

    // Stored already: nothing is sent. Were the bytes sent again, the object would be written anew.
    const [before] = (await client.send(new ListObjectsV2Command({ Bucket: settings.bucket, Prefix: stored.storageKey }))).Contents!;
    await new Promise((r) => setTimeout(r, 1100));
    expect(await store.putFile(file)).toMatchObject({ hash: stored.hash, created: false });
    const [after] = (await client.send(new ListObjectsV2Command({ Bucket: settings.bucket, Prefix: stored.storageKey }))).Contents!;
    expect(after!.LastModified).toEqual(before!.LastModified);

    await expect(store.putFile(file, { maxBytes: bytes.length - 1 })).rejects.toBeInstanceOf(TooLargeError);
  });

  it('removes what it uploaded when the file changed meanwhile', async () => {
    const store = new S3BlobStore(settings);
    // Three upload parts: the upload is still under way when the file changes.
    const bytes = randomBytes(24 * MiB);
    const file = path.join(dir, 'changing.bin');
    writeFileSync(file, bytes);
    const storing = store.putFile(file);
    storing.catch(() => undefined);
    // Once its multipart upload exists the file has been looked at and hashed; then a writer
    // touches it, as one that rewrote it would.
    for (let i = 0; i < 400; i++) {
      const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: settings.bucket }));
      if ((uploads.Uploads ?? []).length > 0) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    utimesSync(file, new Date(), new Date(Date.now() + 60_000));
    await expect(storing).rejects.toThrow(/changed while it was being stored/);
    expect(await store.has(blake3Hex(bytes))).toBe(false);
  });
});
