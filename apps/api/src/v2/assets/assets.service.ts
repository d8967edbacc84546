import { Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { JobStore } from '#libs/jobs';
import { blobSurvived, notExpired, createAssetRecord, deleteAssetsAndOrphanBlobs, deleteAssetUnlessInUse, discardUnrecordedBytes, guessContentType, recordUploadedAsset, validateFilePath } from '#libs/assets';
import type { Config } from '#libs/config';
import { ApiError, AssetExpiresInSchema, AssetFromHashSchema, type AssetView } from '#libs/contracts';
import type { Asset, Db } from '#libs/db';
import { formatHashRef, linkLifetimeSeconds, parseHashRef, StorageUnavailableError, TooLargeError, type BlobStore, type StoredBlob } from '#libs/storage';
import { componentLogger } from '#libs/logging';
import { BLOB_STORE, CONFIG, DB } from '../../core/tokens.js';
import { requestOrigin } from '../../http/request-origin.js';
import { isMediaType } from '../../http/send-blob.js';
import { parseV2Input } from '../parse-input.js';
import { ModelStorage } from './model-storage.js';

/** Who records an asset: an account, with its limit on model files. */
export type Owner = { id: string; maxModelBytes: bigint };

// As for every dependency that fails: a retry through the balancer may already reach a replica
// whose store takes writes (readiness takes this one out within seconds).
const STORAGE_RETRY_AFTER_SECONDS = 1;

export interface AssetOptions {
  contentType?: string;
  filePath?: string;
  tags?: string[];
  expiresIn?: number;
}

/** `expires_in` of a resumable upload's metadata (its text), by the rule of the JSON bodies. */
export function parseExpiresIn(value: unknown): number | undefined {
  return parseV2Input(AssetExpiresInSchema, value);
}

function checkContentType(value: string | undefined, fallback: string): string {
  if (value === undefined || value === '') return fallback;
  if (!isMediaType(value)) throw ApiError.invalid('content_type must be a media type such as image/png.');
  return value;
}

/**
 * The file part's own Content-Type, when it says something: browsers send whatever they like there,
 * so anything that is not a media type falls back to the guess from the file name, not a 400.
 */
export function partContentType(mimeType: string | undefined): string | undefined {
  if (!mimeType || mimeType === 'application/octet-stream' || !isMediaType(mimeType)) return undefined;
  return mimeType;
}

function checkFilePath(value: string): string {
  const problem = validateFilePath(value);
  if (problem) throw ApiError.invalid(`file_path ${problem}.`);
  return value;
}

@Injectable()
export class AssetsService {
  private readonly logger = componentLogger('Assets');

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    @Inject(CONFIG) private readonly config: Config,
    private readonly models: ModelStorage,
    private readonly jobs: JobStore,
  ) {}

  /**
   * Streams bytes into the store (hashing on the way) and returns the stored blob. `maxBytes`: the
   * multipart upload's limit unless the route has its own (resumable uploads, imports by URL).
   */
  async storeBytes(body: Readable, maxBytes = this.config.maxUploadBytes): Promise<StoredBlob> {
    try {
      return await this.store.put(body, { maxBytes });
    } catch (err) {
      if (err instanceof TooLargeError || (err as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') {
        throw new ApiError('payload_too_large', `The file is larger than the limit of ${maxBytes} bytes.`, { max_bytes: maxBytes });
      }
      if (err instanceof StorageUnavailableError) {
        // put() leaves nothing behind when it fails, so there is nothing to undo.
        this.logger.error(err.message);
        throw new ApiError('service_unavailable', 'The file could not be stored right now; nothing was kept. Retry later.', undefined, {
          'retry-after': String(STORAGE_RETRY_AFTER_SECONDS),
        });
      }
      throw err;
    }
  }

  /**
   * A file path's rules before any byte is stored, where the route knows it first (a resumable
   * upload's metadata): well formed, a model folder of the engines under `models/`, and room for
   * `sizeBytes` more among the account's model files.
   */
  async checkPlacement(account: Owner, filePath: string, sizeBytes: number): Promise<string> {
    const checked = checkFilePath(filePath);
    await this.models.checkPath(checked);
    await this.models.checkRoom(account, checked, sizeBytes);
    return checked;
  }

  /**
   * Records an upload. `created_new` (and 201) says whether these bytes were new to the caller's
   * store, and is kept with the record, so every later read says the same: whether anyone else
   * stored them would reveal another account's files.
   */
  async finishUpload(
    account: Owner,
    stored: StoredBlob,
    upload: { fileName: string; mimeType?: string; expectedHash?: string } & AssetOptions,
    request: FastifyRequest,
  ): Promise<{ view: AssetView; createdNew: boolean }> {
    if (upload.expectedHash !== undefined) {
      const expected = parseHashRef(upload.expectedHash);
      if (!expected || expected !== stored.hash) {
        if (!expected) throw ApiError.invalid('expected_hash must look like blake3:<64 hex digits>.');
        throw new ApiError('hash_mismatch', 'The uploaded bytes do not match expected_hash; nothing was stored.', {
          expected_hash: formatHashRef(expected),
          actual_hash: formatHashRef(stored.hash),
        });
      }
    }
    const filePath = checkFilePath(upload.filePath || upload.fileName || 'upload.bin');
    const contentType = checkContentType(upload.contentType, partContentType(upload.mimeType) ?? guessContentType(filePath));
    await this.models.checkPath(filePath);
    await this.models.checkRoom(account, filePath, stored.sizeBytes, stored.hash);
    const asset = await recordUploadedAsset(this.db, stored, {
      accountId: account.id,
      filePath,
      contentType,
      tags: upload.tags,
      expiresAt: upload.expiresIn ? new Date(Date.now() + upload.expiresIn * 1000) : null,
    });
    await this.keepOrDrop(asset.id, stored.hash);
    await this.models.checkRecorded(account, filePath, stored.sizeBytes, () => this.drop(asset.id));
    return { view: await this.view(asset, BigInt(stored.sizeBytes), request), createdNew: asset.createdNew };
  }

  /** Removes a record this request made and must not keep (and its bytes, when nothing else has them). */
  private async drop(assetId: string): Promise<void> {
    await deleteAssetsAndOrphanBlobs(this.db, this.store, [assetId]);
  }

  /**
   * The stream is spent, so an upload whose bytes a concurrent deletion of the same blob removed
   * cannot be stored again: its asset goes, and the client is asked to retry.
   */
  async keepOrDrop(assetId: string, hash: string): Promise<void> {
    if (await blobSurvived(this.db, this.store, hash)) return;
    // Should the store refuse this too, the answer is still the retryable 503.
    await deleteAssetsAndOrphanBlobs(this.db, this.store, [assetId]).catch(() => undefined);
    throw new ApiError('service_unavailable', 'The same bytes were being deleted while they were uploaded; retry the upload.', undefined, { 'retry-after': '1' });
  }

  /**
   * Deletes bytes an upload stored but did not record. Bytes that were there before it belong to
   * someone else; bytes another upload recorded meanwhile stay (discardUnrecordedBytes checks).
   */
  async discardUnrecorded(stored: StoredBlob): Promise<void> {
    if (stored.created) await discardUnrecordedBytes(this.db, this.store, stored.hash);
  }

  /**
   * A new record over a blob the caller already uses (`created`: 201), or the identical record it
   * has (200); another account's blob looks unknown. The bytes were never new: `created_new` false.
   */
  async fromHash(
    account: Owner,
    json: unknown,
    request: FastifyRequest,
  ): Promise<{ view: AssetView; created: boolean }> {
    const body = parseV2Input(AssetFromHashSchema, json);
    const hash = parseHashRef(body.hash)!;
    const tags = body.tags ?? [];
    const expiresIn = body.expires_in;
    const mine = { accountId: account.id, blobHash: hash, ...notExpired() };
    const existing = await this.db.asset.findFirst({ where: mine, include: { blob: true }, orderBy: { createdAt: 'asc' } });
    if (!existing) throw new ApiError('blob_not_found', 'No blob with this hash is available to you.');
    const filePath = body.file_path === undefined ? existing.filePath : checkFilePath(body.file_path);
    const contentType = checkContentType(body.content_type, body.file_path === undefined ? existing.contentType : guessContentType(filePath));
    await this.models.checkPath(filePath);
    // Any of the caller's records may be the identical one, not only the oldest. A record asked to
    // expire is never identical: its deadline counts from now. Nor is a record that expires, or a
    // job's output (it goes with its job), to a caller asking for a permanent one.
    const identical =
      expiresIn === undefined
        ? await this.db.asset.findFirst({
            where: { accountId: account.id, blobHash: hash, expiresAt: null, jobId: null, filePath, contentType, tags: { equals: tags } },
            orderBy: { createdAt: 'asc' },
          })
        : null;
    if (identical) return { view: await this.view(identical, existing.blob.sizeBytes, request), created: false };
    await this.models.checkRoom(account, filePath, Number(existing.blob.sizeBytes), hash);
    const asset = await createAssetRecord(this.db, {
      accountId: account.id,
      blobHash: hash,
      filePath,
      contentType,
      tags,
      expiresAt: expiresIn ? new Date(Date.now() + expiresIn * 1000) : null,
    });
    // The last record of these bytes was deleted, with them, since the look-up above.
    if (!asset) throw new ApiError('blob_not_found', 'No blob with this hash is available to you.');
    await this.models.checkRecorded(account, filePath, Number(existing.blob.sizeBytes), () => this.drop(asset.id));
    return { view: await this.view(asset, existing.blob.sizeBytes, request), created: true };
  }

  async hasBlob(account: { id: string }, hashRef: string): Promise<boolean> {
    const hash = parseHashRef(hashRef);
    if (!hash) return false;
    const found = await this.db.asset.findFirst({
      where: { accountId: account.id, blobHash: hash, ...notExpired() },
      select: { id: true },
    });
    return found !== null;
  }

  /** The caller's live asset, or 404 exactly as if it did not exist. */
  async find(account: { id: string }, id: string): Promise<Asset & { blob: { sizeBytes: bigint } }> {
    const asset = await this.db.asset.findFirst({
      where: { id, accountId: account.id, ...notExpired() },
      include: { blob: { select: { sizeBytes: true } } },
    });
    if (!asset) throw ApiError.notFound('asset');
    return asset;
  }

  async remove(account: { id: string }, id: string): Promise<void> {
    const asset = await this.find(account, id);
    // Throws asset_in_use while a live job uses it; false: a concurrent delete took it first.
    if (!(await deleteAssetUnlessInUse(this.db, this.store, asset, (tx, accountId, assetId) => this.jobs.assetInUse(tx, accountId, assetId)))) throw ApiError.notFound('asset');
    await this.models.deleted(asset.filePath, asset.blobHash);
  }

  async signedUrl(asset: Asset, request: FastifyRequest): Promise<{ url: string; expiresAt: Date }> {
    return this.store.signedUrl(asset.blobHash, {
      fileName: asset.filePath.split('/').pop() || 'file',
      contentType: asset.contentType,
      expiresInSeconds: linkLifetimeSeconds(this.config.signedUrlTtlSeconds, asset.expiresAt),
      origin: requestOrigin(request, this.config),
    });
  }

  async view(asset: Asset, sizeBytes: bigint, request: FastifyRequest): Promise<AssetView> {
    const signed = await this.signedUrl(asset, request);
    return {
      id: asset.id,
      hash: formatHashRef(asset.blobHash),
      size_bytes: Number(sizeBytes),
      content_type: asset.contentType,
      file_path: asset.filePath,
      tags: asset.tags,
      created_new: asset.createdNew,
      created_at: asset.createdAt.toISOString(),
      url: signed.url,
      url_expires_at: signed.expiresAt.toISOString(),
      expires_at: asset.expiresAt ? asset.expiresAt.toISOString() : null,
      job_id: asset.jobId,
    };
  }
}
