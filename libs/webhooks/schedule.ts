// When a failed attempt is tried again: the Standard Webhooks schedule, after the first attempt
// (made at once): 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. Eight attempts over about 27.6 hours.
export const RETRY_DELAYS_SECONDS = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;

// A Retry-After is honoured up to this long; a longer one waits this long.
const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;

/** How an attempt ended, as far as retrying goes. */
export type AttemptResult =
  | { kind: 'delivered'; status: number }
  /** An answer that retrying may change: 408, 429, 5xx. */
  | { kind: 'retryable_status'; status: number; retryAfterMs: number | null }
  /** Any other answer: final (410 also disables the endpoint). */
  | { kind: 'refused_status'; status: number }
  | { kind: 'timeout' }
  | { kind: 'connection_error'; message: string }
  /** The target resolved to an address webhooks may not reach: final, as it would be every time. */
  | { kind: 'blocked_address'; message: string };

export function classifyStatus(status: number, retryAfter: string | undefined, now = Date.now()): AttemptResult {
  if (status >= 200 && status < 300) return { kind: 'delivered', status };
  if (status === 408 || status === 429 || status >= 500) return { kind: 'retryable_status', status, retryAfterMs: parseRetryAfter(retryAfter, now) };
  return { kind: 'refused_status', status };
}

/** `Retry-After` in seconds or as an HTTP date, in ms from `now`; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  let ms: number;
  if (/^\d{1,10}$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return null;
    ms = at - now;
  }
  return Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS);
}

export function isRetryable(result: AttemptResult): boolean {
  return result.kind === 'retryable_status' || result.kind === 'timeout' || result.kind === 'connection_error';
}

/**
 * The wait before the next attempt after attempt number `attempt` (1-based) failed retryably, or
 * null when that was the last. The schedule is scaled by `scale` (tests); a Retry-After the
 * receiver sent is honoured as it is (it waits at least that long).
 */
export function nextDelayMs(attempt: number, scale: number, retryAfterMs: number | null = null): number | null {
  const delay = RETRY_DELAYS_SECONDS[attempt - 1];
  if (delay === undefined) return null;
  return Math.max(Math.round(delay * 1000 * scale), retryAfterMs ?? 0);
}
