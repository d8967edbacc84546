import { Inject, Injectable } from '@nestjs/common';
import { deleteAssetsAndOrphanBlobs } from '#libs/assets';
import { ApiError } from '#libs/contracts';
import type { Db } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import { BLOB_STORE, DB } from '../../core/tokens.js';

const KEY_TTL_MS = 24 * 3600 * 1000;

function reused(assetId: string): ApiError {
  return new ApiError('idempotency_key_reuse', 'This Idempotency-Key was already used; the asset its upload recorded is details.asset_id.', { asset_id: assetId });
}

/**
 * The Idempotency-Key of asset uploads, by the public v2 rule for keys: single-use for 24 hours.
 * A key is taken only once its upload is recorded, so an upload that failed leaves it free; any
 * later upload presenting it is refused before its body is read, and told (beyond the public
 * contract, additively) which asset the key's upload made.
 */
@Injectable()
export class UploadKeys {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
  ) {}

  /** 422 `idempotency_key_reuse` when the key is taken; an expired record is removed. */
  async refuseUsed(accountId: string, key: string): Promise<void> {
    const record = await this.db.assetUploadKey.findUnique({ where: { accountId_key: { accountId, key } } });
    if (!record) return;
    if (record.expiresAt.getTime() > Date.now()) throw reused(record.assetId);
    await this.db.assetUploadKey.deleteMany({ where: { accountId, key, expiresAt: { lte: new Date() } } });
  }

  /**
   * Takes the key for the asset an upload just recorded. A concurrent upload with the same key
   * that took it first wins: this upload's asset is removed again and the answer names the winner's.
   */
  async claim(accountId: string, key: string, assetId: string): Promise<void> {
    const taken = await this.db.$queryRaw<{ asset_id: string }[]>`
      INSERT INTO asset_upload_keys (account_id, key, asset_id, expires_at)
      VALUES (${accountId}::uuid, ${key}, ${assetId}::uuid, ${new Date(Date.now() + KEY_TTL_MS)})
      ON CONFLICT (account_id, key) DO NOTHING
      RETURNING asset_id::text`;
    if (taken.length > 0) return;
    await deleteAssetsAndOrphanBlobs(this.db, this.store, [assetId]);
    const winner = await this.db.assetUploadKey.findUnique({ where: { accountId_key: { accountId, key } } });
    throw reused(winner?.assetId ?? assetId);
  }
}
