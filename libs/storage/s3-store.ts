import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { finished, PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCopyCommand,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { Blake3Tap, blake3File, blake3Hex, isBlake3Hex } from './blake3.js';
import { contentDisposition, dispositionFor } from './content-disposition.js';
import { blobKey, type BlobStore, type ByteRange, type PutBytesOptions, type SignedUrl, type SignOptions, type StoredBlob } from './blob-store.js';
import { drain } from './drain.js';
import { TooLargeError } from './limits.js';
import { StorageUnavailableError } from './unavailable.js';

const PROBE_BYTES = Buffer.from('readiness probe\n');
// Multipart uploads: memory held per upload is the part size times the parts in flight. S3 takes
// at most 10,000 parts, so a file of known size larger than that many parts gets larger parts.
const UPLOAD_PART_BYTES = 8 * 1024 * 1024;
const MAX_UPLOAD_PARTS = 10_000;
const UPLOAD_PARTS_IN_FLIGHT = 2;
// A file is hashed in pieces of this size before it is uploaded.
const FILE_PIECE_BYTES = 1024 * 1024;

/**
 * S3's rules for server-side copies: one CopyObject takes a source of at most 5 GiB; a larger one
 * is copied as a multipart upload whose parts (UploadPartCopy, 5 MiB to 5 GiB each, at most
 * 10,000) name byte ranges of the source.
 */
export interface CopyRules {
  maxSingleCopyBytes: number;
  copyPartBytes: number;
  copyPartsInFlight: number;
}

const S3_COPY_RULES: CopyRules = { maxSingleCopyBytes: 5 * 1024 ** 3, copyPartBytes: 1024 ** 3, copyPartsInFlight: 4 };

export interface S3Settings {
  endpoint: string;
  publicEndpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle: boolean;
  requestTimeoutMs: number;
}

function clientConfig(s: S3Settings, endpoint: string): S3ClientConfig {
  return {
    region: s.region,
    endpoint: endpoint || undefined,
    forcePathStyle: s.forcePathStyle,
    credentials: s.accessKeyId ? { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey } : undefined,
    // Since 3.729 the SDK adds CRC32 checksums that S3-compatible stores reject on presigned URLs.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 3,
    // Without these a store that accepts connections and never answers hangs an upload for ever
    // (the SDK only warns about a request timeout unless told to throw).
    requestHandler: { connectionTimeout: Math.min(5_000, s.requestTimeoutMs), requestTimeout: s.requestTimeoutMs, throwOnRequestTimeout: true },
  };
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404;
}

/**
 * The whole body when it ends within `limit` bytes; otherwise null, with what was read put back
 * in front of the body, which is left paused for whoever reads it next.
 */
async function readUpTo(body: Readable, limit: number): Promise<Buffer | null> {
  const pieces: Buffer[] = [];
  let size = 0;
  const ended = await new Promise<boolean>((resolve, reject) => {
    const onData = (chunk: Buffer | string) => {
      const piece = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      pieces.push(piece);
      size += piece.length;
      if (size > limit) {
        body.pause();
        body.off('data', onData);
        stopWatching();
        // Put back at once, last piece first (no copy of them): a source read to its end would
        // otherwise emit 'end' before the next reader is attached, and these bytes be lost to it.
        for (let i = pieces.length - 1; i >= 0; i--) body.unshift(pieces[i]);
        resolve(false);
      }
    };
    // The end, an error, or a source gone without either (a client that hung up).
    const stopWatching = finished(body, (err) => {
      body.off('data', onData);
      stopWatching();
      if (err) reject(err);
      else resolve(true);
    });
    body.on('data', onData);
  });
  if (ended) {
    // Nothing reads it any more; a late error of its source must not go unhandled.
    body.on('error', () => undefined);
    return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces, size);
  }
  return null;
}

/** Production storage: any S3-compatible store, read by clients through presigned URLs. */
export class S3BlobStore implements BlobStore {
  readonly driver = 's3' as const;
  private readonly s3: S3Client;
  // Presigned URLs are signed for the endpoint clients can reach, which may differ from ours.
  private readonly presigner: S3Client;
  private bucketReady: Promise<void> | null = null;

  /** `copy`: S3's own limits; tests lower them to run a multipart copy on a few MiB. */
  constructor(
    private readonly settings: S3Settings,
    private readonly copy: CopyRules = S3_COPY_RULES,
  ) {
    this.s3 = new S3Client(clientConfig(settings, settings.endpoint));
    this.presigner = new S3Client(clientConfig(settings, settings.publicEndpoint));
  }

  /** Creates the bucket when missing (development and tests; production buckets are provisioned). */
  ensureBucket(): Promise<void> {
    this.bucketReady ??= (async () => {
      try {
        await this.s3.send(new HeadBucketCommand({ Bucket: this.settings.bucket }));
      } catch (err) {
        if (!isNotFound(err)) throw err;
        await this.s3.send(new CreateBucketCommand({ Bucket: this.settings.bucket }));
      }
    })().catch((err: unknown) => {
      this.bucketReady = null;
      throw err;
    });
    return this.bucketReady;
  }

  /**
   * The file is hashed first, then uploaded straight under its hash: no temporary key, no
   * server-side copy (which S3 runs at a few hundred MB/s, and refuses past 5 GiB in one call),
   * and bytes the store has already are not sent again. Its size, modification time and inode are
   * compared before and after, so bytes changed meanwhile are never left under a hash they do
   * not have.
   */
  async putFile(file: string, options: { maxBytes?: number } = {}): Promise<StoredBlob> {
    const before = await stat(file);
    if (options.maxBytes !== undefined && before.size > options.maxBytes) throw new TooLargeError(options.maxBytes);
    const { hash, size } = await blake3File(file, FILE_PIECE_BYTES);
    const Bucket = this.settings.bucket;
    const Key = blobKey(hash);
    const unchanged = async () => {
      const after = await stat(file);
      if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || after.ino !== before.ino || size !== before.size) {
        throw new Error(`${path.basename(file)} changed while it was being stored`);
      }
    };
    let created: boolean;
    try {
      await this.ensureBucket();
      created = !(await this.has(hash));
      if (created) {
        const body = createReadStream(file, { highWaterMark: FILE_PIECE_BYTES });
        const partSize = Math.max(UPLOAD_PART_BYTES, Math.ceil(size / MAX_UPLOAD_PARTS));
        await new Upload({ client: this.s3, params: { Bucket, Key, Body: body }, partSize, queueSize: UPLOAD_PARTS_IN_FLIGHT }).done();
      }
    } catch (err) {
      throw new StorageUnavailableError(err);
    }
    try {
      await unchanged();
    } catch (err) {
      // What this call uploaded is not the bytes the hash names.
      if (created) await this.s3.send(new DeleteObjectCommand({ Bucket, Key })).catch(() => undefined);
      throw err;
    }
    return { hash, sizeBytes: size, storageKey: Key, created };
  }

  /** The hash is known before the upload: the bytes go straight under it, no temporary key to copy. */
  async putBytes(bytes: Buffer, options: PutBytesOptions = {}): Promise<StoredBlob> {
    if (options.maxBytes !== undefined && bytes.length > options.maxBytes) throw new TooLargeError(options.maxBytes);
    const hash = blake3Hex(bytes);
    const Key = blobKey(hash);
    try {
      await this.ensureBucket();
      if (!options.skipLookup && (await this.has(hash))) return { hash, sizeBytes: bytes.length, storageKey: Key, created: false };
      await this.s3.send(new PutObjectCommand({ Bucket: this.settings.bucket, Key, Body: bytes, ContentLength: bytes.length }));
      return { hash, sizeBytes: bytes.length, storageKey: Key, created: true };
    } catch (err) {
      throw new StorageUnavailableError(err);
    }
  }

  async put(body: Readable, options: { maxBytes?: number } = {}): Promise<StoredBlob> {
    try {
      await this.ensureBucket();
    } catch (err) {
      await drain(body);
      throw new StorageUnavailableError(err);
    }
    // The upload would hold its first part in memory before choosing between one PUT and a
    // multipart upload anyway: a body that ends within it is hashed first and put straight under
    // its hash (two requests, or one when the bucket has the bytes, instead of four).
    const first = await readUpTo(body, UPLOAD_PART_BYTES);
    if (first !== null) return this.putBytes(first, options);
    const Bucket = this.settings.bucket;
    const tmpKey = `tmp/${randomUUID()}`;
    const tap = new Blake3Tap(options.maxBytes);
    const piped = new PassThrough();
    // The hash is only known at the end, so the bytes go to a temporary key and are copied under
    // their hash afterwards: one pass over the data, bounded memory (part size x queue size).
    const upload = new Upload({
      client: this.s3,
      params: { Bucket, Key: tmpKey, Body: piped },
      partSize: UPLOAD_PART_BYTES,
      queueSize: UPLOAD_PARTS_IN_FLIGHT,
    });
    // The upload only sees `piped`; a failing source (a client that hangs up, a body over the
    // limit) must abort the upload rather than leave it waiting for bytes that never come.
    const feeding = pipeline(body, tap, piped).catch(async (err: unknown) => {
      await upload.abort().catch(() => undefined);
      throw err;
    });
    const uploading = upload.done().catch((err: unknown) => {
      // Nothing reads `piped` any more: drain it, so the source is read to its end and released.
      // (Destroying it would tear down the source too, and with it the connection of a client
      // whose upload we still owe an answer.)
      piped.resume();
      throw err;
    });
    try {
      // Both settle before the verdict: the client's own failure (or a body over the limit) is
      // its answer, whatever the store did meanwhile; a store failure alone is the store's.
      const [fed, uploaded] = await Promise.allSettled([feeding, uploading]);
      if (fed.status === 'rejected') throw fed.reason;
      if (uploaded.status === 'rejected') throw new StorageUnavailableError(uploaded.reason);
      const hash = tap.digest();
      const Key = blobKey(hash);
      try {
        const exists = await this.has(hash);
        if (!exists) await this.copyObject(tmpKey, Key, tap.size);
        return { hash, sizeBytes: tap.size, storageKey: Key, created: !exists };
      } catch (err) {
        throw new StorageUnavailableError(err);
      }
    } finally {
      await this.s3.send(new DeleteObjectCommand({ Bucket, Key: tmpKey })).catch(() => undefined);
    }
  }

  /** A server-side copy within the bucket, in parts when the source is larger than one copy may be. */
  private async copyObject(from: string, to: string, size: number): Promise<void> {
    const Bucket = this.settings.bucket;
    const CopySource = `${Bucket}/${from}`;
    if (size <= this.copy.maxSingleCopyBytes) {
      await this.s3.send(new CopyObjectCommand({ Bucket, Key: to, CopySource }));
      return;
    }
    const { UploadId } = await this.s3.send(new CreateMultipartUploadCommand({ Bucket, Key: to }));
    try {
      const ranges: Array<{ PartNumber: number; start: number; end: number }> = [];
      for (let start = 0; start < size; start += this.copy.copyPartBytes) {
        ranges.push({ PartNumber: ranges.length + 1, start, end: Math.min(size, start + this.copy.copyPartBytes) - 1 });
      }
      const parts: Array<{ PartNumber: number; ETag: string }> = [];
      // A few parts at a time: S3 copies each on its side, so more in flight is more throughput.
      for (let i = 0; i < ranges.length; i += this.copy.copyPartsInFlight) {
        const batch = ranges.slice(i, i + this.copy.copyPartsInFlight);
        const copied = await Promise.all(
          batch.map(({ PartNumber, start, end }) =>
            this.s3.send(new UploadPartCopyCommand({ Bucket, Key: to, UploadId, PartNumber, CopySource, CopySourceRange: `bytes=${start}-${end}` })),
          ),
        );
        copied.forEach((r, j) => parts.push({ PartNumber: batch[j]!.PartNumber, ETag: r.CopyPartResult!.ETag! }));
      }
      await this.s3.send(new CompleteMultipartUploadCommand({ Bucket, Key: to, UploadId, MultipartUpload: { Parts: parts } }));
    } catch (err) {
      await this.s3.send(new AbortMultipartUploadCommand({ Bucket, Key: to, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  async has(hash: string): Promise<boolean> {
    return (await this.size(hash)) !== null;
  }

  async size(hash: string): Promise<number | null> {
    if (!isBlake3Hex(hash)) return null;
    try {
      const head = await this.s3.send(new HeadObjectCommand({ Bucket: this.settings.bucket, Key: blobKey(hash) }));
      return head.ContentLength ?? 0;
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async read(hash: string, range?: ByteRange): Promise<Readable> {
    const out = await this.s3.send(
      new GetObjectCommand({
        Bucket: this.settings.bucket,
        Key: blobKey(hash),
        Range: range ? `bytes=${range.start}-${range.end}` : undefined,
      }),
    );
    return out.Body as Readable;
  }

  async signedUrl(hash: string, o: SignOptions): Promise<SignedUrl> {
    const command = new GetObjectCommand({
      Bucket: this.settings.bucket,
      Key: blobKey(hash),
      ResponseContentType: o.contentType,
      ResponseContentDisposition: contentDisposition(o.fileName, dispositionFor(o.contentType)),
    });
    // S3 counts from X-Amz-Date, a whole second: the expiry reported is the one S3 enforces.
    const signingDate = new Date(Math.floor(Date.now() / 1000) * 1000);
    const url = await getSignedUrl(this.presigner, command, { expiresIn: o.expiresInSeconds, signingDate });
    return { url, expiresAt: new Date(signingDate.getTime() + o.expiresInSeconds * 1000) };
  }

  async delete(hash: string): Promise<void> {
    await this.s3.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: blobKey(hash) }));
  }

  async probeWrite(): Promise<void> {
    await this.ensureBucket();
    // Under tmp/, where uploads stage their bytes (and where a lifecycle rule sweeps leftovers).
    const Key = `tmp/probe-${randomUUID()}`;
    await this.s3.send(new PutObjectCommand({ Bucket: this.settings.bucket, Key, Body: PROBE_BYTES }));
    await this.s3.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key }));
  }
}
