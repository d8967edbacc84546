/**
 * The channel on which the API announces blobs of model files that may be gone (an asset deleted):
 * each worker drops its cached copy once the blob is no longer stored.
 */
export function modelEvictionChannel(redisPrefix: string): string {
  return `${redisPrefix}:models:evict`;
}
