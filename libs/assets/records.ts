import path from 'node:path';
import type { Asset, Db } from '#libs/db';
import type { BlobStore, StoredBlob } from '#libs/storage';
import { isStorableText } from '#libs/contracts';

/** Registers stored bytes; identical bytes share one row. */
export async function recordBlob(db: Db, stored: StoredBlob): Promise<void> {
  await db.blob.upsert({
    where: { hash: stored.hash },
    create: { hash: stored.hash, sizeBytes: BigInt(stored.sizeBytes), storageKey: stored.storageKey },
    update: {},
  });
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

export function createAssetRecord(db: Db, a: NewAsset): Promise<Asset> {
  return db.asset.create({
    data: {
      accountId: a.accountId,
      blobHash: a.blobHash,
      filePath: a.filePath,
      contentType: a.contentType,
      tags: a.tags ?? [],
      jobId: a.jobId ?? null,
      expiresAt: a.expiresAt ?? null,
    },
  });
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
// storage request after another would take seconds.
const PARALLEL_BLOB_DELETES = 8;

/**
 * Deletes asset rows, then every blob no asset references any more (row and bytes). Each blob's
 * bytes go right after its row, so an upload of the same bytes that re-creates the row meanwhile
 * has the shortest window in which its bytes could be deleted under it.
 */
export async function deleteAssetsAndOrphanBlobs(db: Db, store: BlobStore, assetIds: string[]): Promise<number> {
  if (assetIds.length === 0) return 0;
  const assets = await db.asset.findMany({ where: { id: { in: assetIds } }, select: { blobHash: true } });
  const deleted = await db.asset.deleteMany({ where: { id: { in: assetIds } } });
  const hashes = [...new Set(assets.map((a) => a.blobHash))];
  let next = 0;
  const deleteNext = async (): Promise<void> => {
    while (next < hashes.length) {
      const hash = hashes[next++]!;
      const orphan = await db.$queryRaw<{ hash: string }[]>`
        DELETE FROM blobs b WHERE b.hash = ${hash}
        AND NOT EXISTS (SELECT 1 FROM assets a WHERE a.blob_hash = b.hash) RETURNING b.hash`;
      if (orphan.length > 0) await store.delete(hash);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL_BLOB_DELETES, hashes.length) }, deleteNext));
  return deleted.count;
}
