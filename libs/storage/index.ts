export { Blake3Tap, blake3Hex, isBlake3Hex, parseHashRef, formatHashRef } from './blake3.js';
export { createBlobStore, blobKey, linkLifetimeSeconds } from './blob-store.js';
export type { BlobStore, StoredBlob, ByteRange, SignedUrl, SignOptions } from './blob-store.js';
export { signBlobUrl, verifyBlobUrl } from './signing.js';
export type { BlobUrlParams } from './signing.js';
export { TooLargeError } from './limits.js';
export { StorageUnavailableError } from './unavailable.js';
export { StorageWriteProbe } from './write-probe.js';
export { contentDisposition } from './content-disposition.js';
