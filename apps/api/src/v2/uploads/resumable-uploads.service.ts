import { createHmac, randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { DeleteObjectsCommand, S3Client } from '@aws-sdk/client-s3';
import { FileStore } from '@tus/file-store';
import { S3Store } from '@tus/s3-store';
import { Server, type ServerOptions } from '@tus/server';
import { ERRORS, EVENTS, type DataStore, type KvStore, type Upload } from '@tus/utils';
import type { FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import { parseHashRef, type BlobStore } from '#libs/storage';
import { BLOB_STORE, CONFIG, REDIS } from '../../core/tokens.js';
import { requestOrigin } from '../../http/request-origin.js';
import { AssetsService, parseExpiresIn } from '../assets/assets.service.js';
import { RedisLocker } from './redis-locker.js';

/** Where the uploads live in their store: `uploads/<id>` (and the store's own `.info`, `.json`, `.part` beside). */
const KEY_PREFIX = 'uploads/';
const ID = /^[0-9a-f]{12}-[0-9a-f]{32}$/;

/**
 * The S3 store keeps each upload's record (its `.info` object) in a cache of its process. Any API
 * replica may serve the next request of an upload, or delete it, so none keeps a copy: each
 * request reads the record from the bucket (one small GET).
 */
class NoCache<T> implements KvStore<T> {
  async get(): Promise<T | undefined> {
    return undefined;
  }
  async set(): Promise<void> {}
  async delete(): Promise<void> {}
}

/** Who sent a request the tus server is handling, and the request as Fastify has it. */
interface Caller {
  account: Account;
  request: FastifyRequest;
}

/** A refusal in the v2 envelope, in the shape @tus/server sends errors its hooks throw. */
function refusal(err: ApiError): { status_code: number; body: string } {
  const error = err.details === undefined ? { code: err.code, message: err.message } : { code: err.code, message: err.message, details: err.details };
  return { status_code: err.status, body: JSON.stringify({ error }) };
}

/** The metadata a client sends with a new upload (tus `Upload-Metadata`). */
interface UploadFields {
  filePath: string;
  contentType?: string;
  expectedHash?: string;
  expiresIn?: number;
}

function fieldsOf(metadata: Upload['metadata']): UploadFields {
  const m = metadata ?? {};
  const text = (name: string) => (typeof m[name] === 'string' && m[name] !== '' ? m[name] : undefined);
  const filePath = text('file_path') ?? text('filename');
  if (!filePath) throw new ApiError('invalid_request', 'Upload-Metadata must name the file: file_path (or filename).');
  const expectedHash = text('expected_hash');
  if (expectedHash !== undefined && !parseHashRef(expectedHash)) throw ApiError.invalid('expected_hash must look like blake3:<64 hex digits>.');
  return { filePath, contentType: text('content_type') ?? text('filetype'), expectedHash, expiresIn: parseExpiresIn(text('expires_in')) };
}

/**
 * Resumable uploads over the tus protocol (@tus/server): a client creates an upload with its
 * length and metadata, sends the bytes in one or more PATCH requests, and after a broken
 * connection asks for the offset (HEAD) and goes on from there. The bytes wait in the tus store
 * (its file store in the storage directory, or its S3 store in the bucket), streamed, never whole
 * in memory. The last request turns the upload into an asset like any other: the bytes stream
 * into the content-addressed store, hashed with blake3 on the way (and compared with
 * `expected_hash` when the client gave one), deduplicated as any upload, and the tus copy is
 * deleted.
 *
 * Uploads are the account's: an upload id carries a keyed tag of its account, and a request for
 * an id of another account's tag is answered as one for an id that does not exist.
 */
@Injectable()
export class ResumableUploads implements OnModuleDestroy {
  readonly server: Server;
  private readonly datastore: FileStore | S3Store;
  private readonly locker: RedisLocker;
  private readonly subscriber: Redis;
  private readonly callers = new WeakMap<Request, Caller>();
  private readonly s3: { client: S3Client; bucket: string } | null;
  private cleanup: NodeJS.Timeout | null = null;

  private storeReady: Promise<void> | null = null;

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    @Inject(REDIS) redis: Redis,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    private readonly assets: AssetsService,
  ) {
    const expiry = config.resumableUploads.expirySeconds * 1000;
    const storage = config.storage;
    if (storage.driver === 's3') {
      const s3Config = {
        region: storage.region,
        endpoint: storage.endpoint || undefined,
        forcePathStyle: storage.forcePathStyle,
        credentials: storage.accessKeyId ? { accessKeyId: storage.accessKeyId, secretAccessKey: storage.secretAccessKey } : undefined,
        requestChecksumCalculation: 'WHEN_REQUIRED' as const,
        responseChecksumValidation: 'WHEN_REQUIRED' as const,
      };
      this.datastore = new S3Store({ s3ClientConfig: { bucket: storage.bucket, ...s3Config }, expirationPeriodInMilliseconds: expiry, useTags: false, cache: new NoCache() });
      this.s3 = { client: new S3Client(s3Config), bucket: storage.bucket };
    } else {
      this.datastore = new FileStore({ directory: path.resolve(storage.dir), expirationPeriodInMilliseconds: expiry });
      this.s3 = null;
    }
    this.subscriber = redis.duplicate();
    this.subscriber.on('error', () => undefined);
    this.locker = new RedisLocker(redis, this.subscriber, config.redisPrefix);
    const options: ServerOptions & { datastore: DataStore } = {
      path: `${config.api.basePath}/api/v2/uploads`,
      datastore: this.datastore,
      locker: this.locker,
      maxSize: config.resumableUploads.maxBytes,
      // The API's own CORS layer answers for every route; the tus server adds no origin of its own.
      allowedOrigins: () => false,
      namingFunction: (req) => `${KEY_PREFIX}${this.tagOf(this.caller(req).account.id)}-${randomBytes(16).toString('hex')}`,
      getFileIdFromRequest: (_req, last) => (last && ID.test(last) ? `${KEY_PREFIX}${last}` : undefined),
      generateUrl: (req, { id }) => `${requestOrigin(this.caller(req).request, config)}${config.api.basePath}/api/v2/uploads/${id.slice(KEY_PREFIX.length)}`,
      onIncomingRequest: async (req, id) => {
        if (!id.startsWith(`${KEY_PREFIX}${this.tagOf(this.caller(req).account.id)}-`)) throw ERRORS.FILE_NOT_FOUND;
      },
      onUploadCreate: async (req, upload) => {
        try {
          const fields = fieldsOf(upload.metadata);
          const { account } = this.caller(req);
          await this.assets.checkPlacement(account, fields.filePath, upload.size ?? 0);
          return {};
        } catch (err) {
          if (err instanceof ApiError) throw refusal(err);
          throw err;
        }
      },
      onUploadFinish: async (req, upload) => {
        try {
          const view = await this.finish(this.caller(req), upload);
          return { status_code: req.method === 'POST' ? 201 : 200, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(view) };
        } catch (err) {
          if (err instanceof ApiError) throw refusal(err);
          throw err;
        }
      },
    };
    this.server = new Server(options);
    // The S3 store's termination leaves the upload's last short part behind: it goes too.
    if (this.s3) this.server.on(EVENTS.POST_TERMINATE, (_req: unknown, _res: unknown, id: string) => void this.discard(id).catch(() => undefined));
    // Unfinished uploads past their expiry go; a store that cannot list them (some S3-compatible
    // servers) leaves that to its own lifecycle rules.
    this.cleanup = setInterval(() => void this.server.cleanUpExpiredUploads().catch(() => undefined), Math.min(expiry, 3600_000));
    this.cleanup.unref();
  }

  onModuleDestroy(): void {
    if (this.cleanup) clearInterval(this.cleanup);
    this.subscriber.disconnect();
  }

  /** The keyed tag of an account in its upload ids: the same for each of its uploads, telling nothing of the account. */
  private tagOf(accountId: string): string {
    return createHmac('sha256', this.config.signingSecret).update(`uploads:${accountId}`).digest('hex').slice(0, 12);
  }

  private caller(req: Request): Caller {
    const caller = this.callers.get(req);
    if (!caller) throw ERRORS.UNKNOWN_ERROR;
    return caller;
  }

  /** Serves one tus request of an authenticated account. */
  async handle(request: Request, caller: Caller): Promise<Response> {
    // The bucket the S3 store writes to exists (made in development and tests, as the blob store does).
    this.storeReady ??= this.store.probeWrite().catch((err: unknown) => {
      this.storeReady = null;
      throw err;
    });
    await this.storeReady;
    this.callers.set(request, caller);
    return this.server.handleWeb(request);
  }

  /**
   * The finished upload as an asset. Two requests finishing the same upload (a client that
   * retried its last PATCH) take turns under the upload's lock; the second finds it gone.
   */
  private async finish(caller: Caller, upload: Upload): Promise<unknown> {
    const fields = fieldsOf(upload.metadata);
    const lock = this.locker.newLock(upload.id);
    await lock.lock(AbortSignal.timeout(60_000), () => undefined);
    try {
      await this.datastore.getUpload(upload.id).catch(() => {
        throw ApiError.notFound('upload');
      });
      const stored = await this.assets.storeBytes((await this.datastore.read(upload.id)) as Readable, this.config.resumableUploads.maxBytes);
      let finished;
      try {
        finished = await this.assets.finishUpload(
          caller.account,
          stored,
          { fileName: path.posix.basename(fields.filePath), filePath: fields.filePath, contentType: fields.contentType, expectedHash: fields.expectedHash, expiresIn: fields.expiresIn },
          caller.request,
        );
      } catch (err) {
        await this.assets.discardUnrecorded(stored);
        // Refused for what it is (its hash, its path, the account's room): the upload goes too.
        if (err instanceof ApiError && err.status < 500) await this.discard(upload.id);
        throw err;
      }
      await this.discard(upload.id);
      return finished.view;
    } finally {
      await lock.unlock();
    }
  }

  /** Deletes an upload's bytes and records from the tus store. */
  private async discard(id: string): Promise<void> {
    if (this.s3) {
      // The S3 store's own removal aborts the multipart upload first, which fails once it completed.
      await this.s3.client.send(new DeleteObjectsCommand({ Bucket: this.s3.bucket, Delete: { Objects: [{ Key: id }, { Key: `${id}.info` }, { Key: `${id}.part` }] } }));
      return;
    }
    await this.datastore.remove(id).catch(() => undefined);
  }
}
