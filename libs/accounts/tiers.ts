export interface TierLimits {
  maxConcurrentJobs: number;
  maxQueuedJobs: number;
  requestsPerMinute: number;
  maxEventStreams: number;
}

// Defaults an account gets from its tier; operators may override any of them per account.
export const TIERS = {
  free: { maxConcurrentJobs: 1, maxQueuedJobs: 20, requestsPerMinute: 120, maxEventStreams: 10 },
  pro: { maxConcurrentJobs: 3, maxQueuedJobs: 500, requestsPerMinute: 1200, maxEventStreams: 100 },
  enterprise: { maxConcurrentJobs: 10, maxQueuedJobs: 10_000, requestsPerMinute: 60_000, maxEventStreams: 5_000 },
} as const satisfies Record<string, TierLimits>;

export type TierName = keyof typeof TIERS;

export function tierLimits(tier: string): TierLimits {
  const found = (TIERS as Record<string, TierLimits>)[tier];
  if (!found) throw new Error(`Unknown tier "${tier}" (known: ${Object.keys(TIERS).join(', ')})`);
  return found;
}
