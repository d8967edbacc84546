// Error codes of the v2 contract (and those the public service is known to use), with their status.
export const ERROR_STATUS = {
  invalid_workflow: 422,
  workflow_format_ui: 422,
  missing_asset: 422,
  hash_mismatch: 409,
  asset_in_use: 409,
  blob_not_found: 404,
  idempotency_key_reuse: 422,
  queue_full: 429,
  insufficient_credits: 402,
  not_found: 404,
  unauthorized: 401,
  forbidden: 403,
  rate_limited: 429,
  too_many_streams: 429,
  upstream_error: 500,
  service_unavailable: 503,
  deployment_not_ready: 429,
  deployment_stopped: 422,
  not_implemented: 501,
  // Request problems the contract leaves to us: each gets its own code so clients can tell them apart.
  invalid_request: 400,
  invalid_json: 400,
  unsupported_media_type: 415,
  payload_too_large: 413,
  // The account's model files would take more bytes than its tier allows.
  storage_limit_exceeded: 413,
  // A resumable upload's request conflicts with its state (the offset moved on, another request holds it).
  upload_conflict: 409,
  // A file the service was asked to fetch from a URL could not be fetched (details.reason says why).
  import_failed: 422,
  method_not_allowed: 405,
  range_not_satisfiable: 416,
  request_timeout: 408,
  inactive_account: 429,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorEnvelope {
  error: { code: string; message: string; details?: Record<string, unknown> | null };
}

/** An error meant for the client: it leaves the API as an ErrorEnvelope with its status. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }

  static notFound(what = 'resource'): ApiError {
    return new ApiError('not_found', `The ${what} was not found.`);
  }

  /** The 404 of a route this surface does not have: the same body as an unknown path's. */
  static noRoute(): ApiError {
    return new ApiError('not_found', 'Not found.');
  }

  static invalid(message: string, details?: Record<string, unknown>): ApiError {
    return new ApiError('invalid_request', message, details);
  }

  static retryAfter(code: 'queue_full' | 'rate_limited' | 'too_many_streams' | 'deployment_not_ready' | 'inactive_account', message: string, seconds: number): ApiError {
    return new ApiError(code, message, undefined, { 'retry-after': String(Math.max(1, Math.ceil(seconds))) });
  }
}

export function errorEnvelope(code: string, message: string, details?: Record<string, unknown>): ErrorEnvelope {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}
