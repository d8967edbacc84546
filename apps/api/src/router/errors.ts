// The errors that carry the router's buckets (libs/contracts) out of a request.
import { ROUTER_BUCKET_STATUS, type RouterBucket } from '#libs/contracts';

export { ROUTER_BUCKETS, type RouterBucket } from '#libs/contracts';
export const BUCKET_STATUS = ROUTER_BUCKET_STATUS;

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
