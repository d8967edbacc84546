export const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/** Exponential backoff with full jitter: 0.25 s, 0.5 s, 1 s … capped at 8 s. */
export function backoffMs(attempt: number): number {
  return Math.random() * Math.min(8_000, 250 * 2 ** attempt);
}

/** A request that never got an answer (refused, reset, cut): the server may or may not have acted on it. */
export function isNetworkError(error: unknown): boolean {
  // By name and message, not instanceof: fetch's errors may come from another realm (a VM context, a polyfill).
  const e = error as { name?: unknown; message?: unknown } | null;
  return !!e && (e.name === 'TypeError' || /fetch failed|socket|ECONN|terminated|other side closed/i.test(String(e.message)));
}
