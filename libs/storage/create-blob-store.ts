import type { Config } from '#libs/config';
import type { BlobStore } from './blob-store.js';
import { LocalBlobStore } from './local-store.js';
import { S3BlobStore } from './s3-store.js';

// The drivers' factory sits apart from the BlobStore contract they implement (blob-store.ts), so
// the contract does not import its drivers and they import it: no cycle between them.

export function createBlobStore(config: Config): BlobStore {
  if (config.storage.driver === 's3') return new S3BlobStore(config.storage);
  return new LocalBlobStore(config.storage.dir, config.signingSecret, config.api.basePath);
}
