import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Db } from '#libs/db';
import { EngineReportCache, jobKeys, type EngineModels } from '#libs/jobs';
import { MODELS_PREFIX, isModelPath, modelEvictionChannel, modelPathProblem } from '#libs/models';
import { CONFIG, DB, REDIS } from '../../core/tokens.js';

/**
 * The rules of model files (assets under `models/<folder>/`): the folder must be one the engines
 * report, and an account's model files take at most its tier's bytes (`max_model_bytes`), each
 * blob counted once however many of its paths name it. Deleting one tells every worker to drop
 * its cached copy once the bytes are gone.
 */
@Injectable()
export class ModelStorage {
  private readonly folders: EngineReportCache<EngineModels>;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.folders = new EngineReportCache<EngineModels>(redis, jobKeys(config.redisPrefix).engineModels);
  }

  /** 422 for a `models/…` path that names no model folder of the engines; nothing for any other path. */
  async checkPath(filePath: string): Promise<void> {
    if (!isModelPath(filePath)) return;
    const reported = await this.folders.get();
    const problem = modelPathProblem(filePath, reported ? Object.keys(reported.folders) : null);
    if (problem) throw ApiError.invalid(`file_path ${problem}.`);
  }

  /** Bytes of the account's live model files, each blob once. */
  async usedBytes(accountId: string): Promise<bigint> {
    const rows = await this.db.$queryRaw<{ used: bigint | null }[]>`
      SELECT sum(b.size_bytes)::bigint AS used FROM blobs b
      WHERE b.hash IN (SELECT a.blob_hash FROM assets a WHERE a.account_id = ${accountId}::uuid AND a.job_id IS NULL
                       AND a.file_path LIKE ${`${MODELS_PREFIX}%`} AND (a.expires_at IS NULL OR a.expires_at > now()))`;
    return rows[0]?.used ?? 0n;
  }

  /** Whether the account already keeps these bytes as one of its model files (they cost nothing more). */
  private async counted(accountId: string, hash: string): Promise<boolean> {
    const found = await this.db.asset.findFirst({
      where: { accountId, blobHash: hash, jobId: null, filePath: { startsWith: MODELS_PREFIX }, OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] },
      select: { id: true },
    });
    return found !== null;
  }

  /**
   * 413 `storage_limit_exceeded` when a model file of `sizeBytes` more (of blob `hash`, when known)
   * would take the account past its limit. Nothing for a path that is no model path.
   */
  async checkRoom(account: { id: string; maxModelBytes: bigint }, filePath: string, sizeBytes: number, hash?: string): Promise<void> {
    if (!isModelPath(filePath)) return;
    if (hash && (await this.counted(account.id, hash))) return;
    const used = await this.usedBytes(account.id);
    if (used + BigInt(sizeBytes) > account.maxModelBytes) throw this.full(account, used, sizeBytes);
  }

  /**
   * After a model file is recorded: over the limit (uploads that passed `checkRoom` together), the
   * new record goes again via `drop` and the answer is 413. Concurrent uploads that overshoot
   * together are all refused; none is kept beyond the limit.
   */
  async checkRecorded(account: { id: string; maxModelBytes: bigint }, filePath: string, sizeBytes: number, drop: () => Promise<void>): Promise<void> {
    if (!isModelPath(filePath)) return;
    const used = await this.usedBytes(account.id);
    if (used <= account.maxModelBytes) return;
    await drop();
    throw this.full(account, used - BigInt(sizeBytes), sizeBytes);
  }

  private full(account: { maxModelBytes: bigint }, used: bigint, sizeBytes: number): ApiError {
    return new ApiError('storage_limit_exceeded', `Model files may take ${account.maxModelBytes} bytes on this account; ${used} are in use and this file has ${sizeBytes}.`, {
      limit_bytes: Number(account.maxModelBytes),
      used_bytes: Number(used),
      file_bytes: sizeBytes,
    });
  }

  /** After a model file's asset is deleted: workers drop their copy of the blob once it is gone. */
  async deleted(filePath: string, hash: string): Promise<void> {
    if (!isModelPath(filePath)) return;
    await this.redis.publish(modelEvictionChannel(this.config.redisPrefix), hash).catch(() => undefined);
  }
}

