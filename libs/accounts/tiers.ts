export interface TierLimits {
  maxConcurrentJobs: number;
  maxQueuedJobs: number;
  requestsPerMinute: number;
  maxEventStreams: number;
  /** Bytes of model files the account may keep (each blob counted once). */
  maxModelBytes: bigint;
}

const GIB = 1024n ** 3n;

// Defaults an account gets from its tier; operators may override any of them per account.
export const TIERS = {
  free: { maxConcurrentJobs: 1, maxQueuedJobs: 20, requestsPerMinute: 120, maxEventStreams: 10, maxModelBytes: 10n * GIB },
  pro: { maxConcurrentJobs: 3, maxQueuedJobs: 500, requestsPerMinute: 1200, maxEventStreams: 100, maxModelBytes: 200n * GIB },
  enterprise: { maxConcurrentJobs: 10, maxQueuedJobs: 10_000, requestsPerMinute: 60_000, maxEventStreams: 5_000, maxModelBytes: 2048n * GIB },
} as const satisfies Record<string, TierLimits>;

export type TierName = keyof typeof TIERS;

export function tierLimits(tier: string): TierLimits {
  const found = (TIERS as Record<string, TierLimits>)[tier];
  if (!found) throw new Error(`Unknown tier "${tier}" (known: ${Object.keys(TIERS).join(', ')})`);
  return found;
}

/**
 * The longest deadline a job of each tier may ask for with Cancel-After (seconds from submission);
 * a longer one is cut to it. A tier setting, not one per account: it bounds what one job may cost.
 * An account of a tier not listed gets the free tier's.
 */
export const TIER_MAX_CANCEL_AFTER_SECONDS: Record<string, number> = { free: 3600, pro: 6 * 3600, enterprise: 24 * 3600 };

export function maxCancelAfterSeconds(tier: string): number {
  return TIER_MAX_CANCEL_AFTER_SECONDS[tier] ?? TIER_MAX_CANCEL_AFTER_SECONDS.free!;
}
