// The router's closed set of error buckets and the errors that carry them out of a request.

export const ROUTER_BUCKETS = [
  'invalid_input',
  'content_policy_violation',
  'provider_error',
  'provider_timeout',
  'insufficient_credits',
  'model_not_found',
  'unauthorized',
  'forbidden',
  'concurrency_limit_exceeded',
  'client_disconnected',
  'internal_error',
  'deadline_exceeded',
  'not_enabled',
  'service_unavailable',
  'rate_limited',
] as const;

export type RouterBucket = (typeof ROUTER_BUCKETS)[number];

/** Status each bucket answers with when it leaves in a RouterErrorResponse. */
export const BUCKET_STATUS: Record<RouterBucket, number> = {
  invalid_input: 400,
  content_policy_violation: 422,
  provider_error: 502,
  provider_timeout: 504,
  insufficient_credits: 402,
  model_not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  concurrency_limit_exceeded: 429,
  // Never delivered (the caller is gone); 499 is what the usage record stores.
  client_disconnected: 499,
  internal_error: 500,
  deadline_exceeded: 504,
  not_enabled: 403,
  service_unavailable: 503,
  rate_limited: 429,
};

/** Leaves as `{detail, error_type}` with `X-Service-Error-Type`. */
export class RouterError extends Error {
  readonly status: number;
  constructor(
    readonly bucket: RouterBucket,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
    status?: number,
  ) {
    super(detail);
    this.status = status ?? BUCKET_STATUS[bucket];
  }
}

/** One entry of RouterValidationErrorResponse. */
export interface ValidationEntry {
  loc: (string | number)[];
  msg: string;
  type: string;
  ctx?: Record<string, unknown>;
  input?: unknown;
}

/** Leaves as 422 `{detail: [...]}`, the bucket only in `X-Service-Error-Type`. */
export class RouterValidationError extends Error {
  constructor(
    readonly bucket: 'invalid_input' | 'content_policy_violation',
    readonly entries: ValidationEntry[],
  ) {
    super(entries.map((e) => e.msg).join('; '));
  }
}
