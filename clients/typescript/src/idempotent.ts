import { ComfyCloudError } from './errors.js';
import { backoffMs, isNetworkError, sleep } from './retry.js';

export interface RetryOptions {
  /** Tries in all after lost answers, 5xx and `Retry-After` refusals (default 4). */
  attempts?: number;
  signal?: AbortSignal;
}

/**
 * Sends a keyed creation until it has an answer. Every try carries the same `Idempotency-Key`;
 * when an earlier try did create the resource but its answer was lost, the server answers `422
 * idempotency_key_reuse` naming it in `error.details[field]`, and `recover` fetches it. Refusals
 * that create nothing (`queue_full`, `rate_limited`, 5xx) leave the key free, so they are tried
 * again after their `Retry-After`.
 */
export async function createOnce<T>(send: () => Promise<T>, field: 'job_id' | 'asset_id', recover: (id: string) => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? 4;
  for (let attempt = 1; ; attempt++) {
    let error: unknown;
    try {
      return await send();
    } catch (e) {
      error = e;
    }
    const created = error instanceof ComfyCloudError && error.code === 'idempotency_key_reuse' ? error.details?.[field] : undefined;
    if (typeof created === 'string') return recover(created);
    if (attempt >= attempts || options.signal?.aborted || !retryable(error)) throw error;
    const after = error instanceof ComfyCloudError ? error.retryAfterSeconds : null;
    await sleep(after !== null ? after * 1000 : backoffMs(attempt), options.signal);
  }
}

/** Lost answers, 5xx, and 429s that say when to come back. */
export function retryable(error: unknown): boolean {
  if (error instanceof ComfyCloudError) return error.status >= 500 || (error.status === 429 && error.retryAfterSeconds !== null);
  return isNetworkError(error);
}
