/**
 * The store would not take bytes the service had in hand: a full or read-only disk, a quota, S3
 * refusing or out of reach. The fault is the service's, not the client's, and it passes (space is
 * freed, S3 comes back), so the client is told to retry rather than that its request was wrong.
 */
export class StorageUnavailableError extends Error {
  constructor(override readonly cause: unknown) {
    super(`The blob store cannot take writes: ${reasonOf(cause)}`);
    this.name = 'StorageUnavailableError';
  }
}

/** One line naming what failed (`ENOSPC: no space left on device, write`), for logs and /readyz. */
export function reasonOf(err: unknown): string {
  const e = (err ?? {}) as { code?: unknown; name?: unknown; message?: unknown; $metadata?: { httpStatusCode?: number } };
  const status = e.$metadata?.httpStatusCode;
  const message = typeof e.message === 'string' && e.message ? e.message : typeof e.name === 'string' ? e.name : 'unknown error';
  const head = message.split('\n')[0]!.slice(0, 160);
  // The SDK's messages for an S3 5xx are often just "UnknownError": the status says more.
  return status ? `${head} (HTTP ${status})` : head;
}
