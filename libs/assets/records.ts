import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { executeStatement, Prisma, type Asset, type Db } from '#libs/db';
import type { BlobStore, StoredBlob } from '#libs/storage';
import { ApiError, isStorableText } from '#libs/contracts';

/** The filter of an asset record still alive: past its `expires_at` it answers 404 until retention deletes it. */
export function notExpired() {
  return { OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] };
}

export interface NewAsset {
  accountId: string;
  blobHash: string;
  filePath: string;
  contentType: string;
  tags?: string[];
  jobId?: string | null;
  expiresAt?: Date | null;
}

/**
 * A new asset over bytes already recorded and referenced (a copy of an existing asset), or null
 * when a deletion took the blob meanwhile. Under the blob's lock, as uploads record theirs. Its
 * bytes were not new to anyone (`created_new` false).
 */
export async function createAssetRecord(db: Db, a: NewAsset): Promise<Asset | null> {
  try {
    const [, asset] = await db.$transaction([
      lockBlob(db, a.blobHash),
      db.asset.create({
        data: {
          accountId: a.accountId,
          blobHash: a.blobHash,
          filePath: a.filePath,
          contentType: a.contentType,
          tags: a.tags ?? [],
          jobId: a.jobId ?? null,
          expiresAt: a.expiresAt ?? null,
        },
      }),
    ]);
    return asset;
  } catch (err) {
    if ((err as { code?: string }).code === 'P2003') return null; // the blob row is gone
    throw err;
  }
}

/**
 * Records freshly stored bytes (identical bytes share one blob row) and an asset over them,
 * under the blob lock, as a deletion of the blob runs. Without it a deletion that had just
 * deleted the blob's last asset would not see this one, still uncommitted, and its delete of the
 * blob row would fail on the reference; with it, the deletion either sees this asset and keeps
 * the blob, or ends before this inserts, and the blob row is recorded anew. One statement
 * (lockedBlobRow). Its bytes are the caller's to check (blobSurvived).
 */
export async function recordUploadedAsset(db: Db, stored: StoredBlob, a: Omit<NewAsset, 'blobHash'>): Promise<Asset> {
  const id = randomUUID();
  await db.$executeRaw`
    WITH ${lockedBlobRow(stored, a.accountId)}
    INSERT INTO assets (id, account_id, blob_hash, file_path, content_type, tags, job_id, expires_at, created_new)
    SELECT ${id}::uuid, ${a.accountId}::uuid, ${stored.hash}, ${a.filePath}, ${a.contentType}, ${a.tags ?? []}::text[], ${a.jobId ?? null}::uuid, ${a.expiresAt ?? null},
           new_to_account FROM lock`;
  return db.asset.findUniqueOrThrow({ where: { id } });
}

/**
 * The first steps of a statement that records an asset over stored bytes in one round trip (rather
 * than a transaction of four: BEGIN, lock, statement, COMMIT): `lock` takes the blob's lock before anything
 * else the statement does (the steps after it select from it) and gives `new_to_account`, what the
 * asset's `created_new` says; `blob` records the blob row, unless identical bytes have one. The
 * question is asked in a snapshot of its own, taken after the lock (blob_lock_new_to_account is
 * volatile): the statement's snapshot, taken before it waited for the lock, would not see a record
 * of the same bytes committed meanwhile, and of two records of the same new bytes both would say new.
 */
export function lockedBlobRow(stored: StoredBlob, accountId: string): Prisma.Sql {
  return Prisma.sql`lock AS (SELECT blob_lock_new_to_account(${accountId}::uuid, ${stored.hash}) AS new_to_account),
    blob AS (
      INSERT INTO blobs (hash, size_bytes, storage_key) SELECT ${stored.hash}, ${BigInt(stored.sizeBytes)}, ${stored.storageKey} FROM lock
      ON CONFLICT (hash) DO NOTHING
    )`;
}

/**
 * recordUploadedAsset and blobSurvived in two round trips instead of four, for callers on a
 * latency budget (the router re-hosting a result while its caller waits): the record (its lock
 * also lets a deletion of the same bytes under way finish), then whether the bytes are still
 * stored, without reading the asset back. False: as for blobSurvived.
 */
export async function recordStoredAsset(db: Db, store: BlobStore, stored: StoredBlob, a: Omit<NewAsset, 'blobHash'>): Promise<boolean> {
  await executeStatement(db, Prisma.sql`
    WITH ${lockedBlobRow(stored, a.accountId)}
    INSERT INTO assets (id, account_id, blob_hash, file_path, content_type, tags, job_id, expires_at, created_new)
    SELECT ${randomUUID()}::uuid, ${a.accountId}::uuid, ${stored.hash}, ${a.filePath}, ${a.contentType}, ${a.tags ?? []}::text[], ${a.jobId ?? null}::uuid, ${a.expiresAt ?? null},
           new_to_account FROM lock`);
  return store.has(stored.hash);
}

const TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.webp': 'image/webp',
  '.gif': 'image/gif',
  '.bmp': 'image/bmp',
  '.tif': 'image/tiff',
  '.tiff': 'image/tiff',
  '.mp4': 'video/mp4',
  '.webm': 'video/webm',
  '.mov': 'video/quicktime',
  '.mkv': 'video/x-matroska',
  '.avi': 'video/x-msvideo',
  '.apng': 'image/apng',
  '.wav': 'audio/wav',
  '.mp3': 'audio/mpeg',
  '.flac': 'audio/flac',
  '.ogg': 'audio/ogg',
  '.opus': 'audio/opus',
  '.txt': 'text/plain; charset=utf-8',
  '.json': 'application/json',
  '.safetensors': 'application/octet-stream',
  '.latent': 'application/octet-stream',
  '.glb': 'model/gltf-binary',
};

export function guessContentType(fileName: string): string {
  return TYPES[path.extname(fileName).toLowerCase()] ?? 'application/octet-stream';
}

/**
 * A file path is a label, never a location on disk, but it shows up in downloads and engine file
 * names, so it must be a plain relative path: no traversal, no absolute paths, no control bytes.
 */
export function validateFilePath(value: string): string | null {
  if (value.length === 0 || value.length > 1024) return 'must be 1 to 1024 characters';
  if (!isStorableText(value)) return 'must be well-formed text';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(value)) return 'must not contain control characters or backslashes';
  if (value.startsWith('/')) return 'must be relative';
  if (value.split('/').some((seg) => seg === '..' || seg === '.' || seg === '')) return 'must not contain empty, "." or ".." segments';
  return null;
}

// Blobs deleted at once by one call: a retention batch orphans hundreds of blobs, and one
// storage request after another would take seconds. Each holds a database connection meanwhile.
const PARALLEL_BLOB_DELETES = 4;

// A blob's deletion (its row, then its bytes) holds this lock until both are gone; an upload of
// the same bytes takes it to record its asset (lockedBlobRow, through blob_lock_new_to_account,
// which hashes the key the same way), and again before checking that they survived
// (blobSurvived). Per hash, so deletions and uploads of other bytes never wait
// on each other.
function lockBlob(db: Pick<Db, '$executeRaw'>, hash: string): Prisma.PrismaPromise<number> {
  return db.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${hash}, 0))`;
}

/**
 * Deletes assets, and with them every blob no asset references any more (row and bytes), a few
 * blobs at a time. Stops at the first blob that cannot be deleted and throws: its assets are
 * still there, so a later pass finds it again.
 */
export async function deleteAssetsAndOrphanBlobs(db: Db, store: BlobStore, assetIds: string[]): Promise<number> {
  if (assetIds.length === 0) return 0;
  const assets = await db.asset.findMany({ where: { id: { in: assetIds } }, select: { id: true, blobHash: true } });
  const byBlob = new Map<string, string[]>();
  for (const { id, blobHash } of assets) {
    const ids = byBlob.get(blobHash);
    if (ids) ids.push(id);
    else byBlob.set(blobHash, [id]);
  }
  const blobs = [...byBlob];
  let deleted = 0;
  let failed = false;
  const deleteNext = async (): Promise<void> => {
    while (!failed && blobs.length > 0) {
      const [hash, ids] = blobs.shift()!;
      try {
        deleted += await deleteBlobAssets(db, store, hash, ids);
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_BLOB_DELETES, blobs.length) }, deleteNext));
  return deleted;
}

/**
 * Deletes one of an account's assets (and its blob, if nothing else references it) unless a job
 * that has not finished uses it; false when it was deleted meanwhile. Its row is locked before
 * the jobs are counted: a submission holds the rows of the assets its job uses until the job is
 * in (InsertBatcher), so either its job is counted here, or it finds the asset gone.
 */
export async function deleteAssetUnlessInUse(
  db: Db,
  store: BlobStore,
  asset: { id: string; accountId: string; blobHash: string },
  // Whether a live job uses the asset: asked of the jobs' owner (JobStore.assetInUse), under the asset's lock.
  inUse: (tx: Prisma.TransactionClient, accountId: string, assetId: string) => Promise<boolean>,
): Promise<boolean> {
  const deleted = await deleteBlobAssets(db, store, asset.blobHash, [asset.id], async (tx) => {
    const locked = await tx.$queryRaw<{ id: string }[]>`SELECT id FROM assets WHERE id = ${asset.id}::uuid FOR UPDATE`;
    if (locked.length === 0) return false;
    if (await inUse(tx, asset.accountId, asset.id)) throw new ApiError('asset_in_use', 'A job that has not finished uses this asset.');
    return true;
  });
  return deleted > 0;
}

/**
 * One transaction under the blob lock: these assets of the blob, then the blob if nothing else
 * references it. When its bytes cannot be deleted everything rolls back, the assets included:
 * deleted alone, they would leave a blob no later pass could find. `mayDelete`, when given, runs
 * first, in the transaction: false deletes nothing, and what it throws rolls it back.
 */
function deleteBlobAssets(db: Db, store: BlobStore, hash: string, assetIds: string[], mayDelete?: (tx: Prisma.TransactionClient) => Promise<boolean>): Promise<number> {
  return db.$transaction(
    async (tx) => {
      await lockBlob(tx, hash);
      if (mayDelete && !(await mayDelete(tx))) return 0;
      const gone = await tx.asset.deleteMany({ where: { id: { in: assetIds } } });
      const orphan = await tx.$queryRaw<{ hash: string }[]>`
        DELETE FROM blobs b WHERE b.hash = ${hash}
        AND NOT EXISTS (SELECT 1 FROM assets a WHERE a.blob_hash = b.hash) RETURNING b.hash`;
      if (orphan.length > 0) await store.delete(hash);
      return gone.count;
    },
    { maxWait: 10_000, timeout: 60_000 },
  );
}

/**
 * Deletes bytes an upload wrote but will not record (they did not match the expected hash),
 * unless another upload recorded the same bytes meanwhile. Under the blob lock, like any
 * deletion of bytes: that upload's check (blobSurvived) then sees what happened.
 */
export async function discardUnrecordedBytes(db: Db, store: BlobStore, hash: string): Promise<void> {
  await db.$transaction(
    async (tx) => {
      await lockBlob(tx, hash);
      if (!(await tx.blob.findUnique({ where: { hash }, select: { hash: true } }))) await store.delete(hash);
    },
    { maxWait: 10_000, timeout: 60_000 },
  );
}

/**
 * Whether the bytes of `hash` are still stored, asked once an asset over them is recorded. An
 * upload writes its bytes before it records them; a deletion of the same bytes that began before
 * the record (no asset referenced them then) can remove them. Waiting on the blob lock lets any
 * such deletion finish, and none can begin after the record. False: the caller's asset has no
 * bytes, and must be stored again or dropped.
 *
 * Asked even of bytes the caller wrote itself: an upload of the same bytes that failed its
 * expected hash may discard them (discardUnrecordedBytes) before this caller records them.
 */
export async function blobSurvived(db: Db, store: BlobStore, hash: string): Promise<boolean> {
  await lockBlob(db, hash);
  return store.has(hash);
}
