import type { z } from 'zod';
import { ApiError, isIdempotencyKey, SubmitJobRequestSchema } from '#libs/contracts';
import { parseWith } from '../../contract/index.js';

export interface SubmitBody {
  workflow: unknown;
  extraData?: Record<string, unknown>;
}

/**
 * v2's validation error: an unknown or reserved field is named first (as the contract words it),
 * a missing workflow is `invalid_workflow`, anything else `invalid_request`.
 */
function refuseSubmission(issues: z.core.$ZodIssue[]): ApiError {
  const issue = issues.find((i) => i.code === 'unrecognized_keys' && i.path.length === 0) ?? issues[0]!;
  if (issue.path.length === 1 && issue.path[0] === 'workflow') return new ApiError('invalid_workflow', issue.message);
  return ApiError.invalid(issue.message);
}

/** `{workflow, extra_data?}` (SubmitJobRequest); extra_data is closed to the partner-credential keys. */
export function parseSubmitBody(body: Record<string, unknown>): SubmitBody {
  const parsed = parseWith(SubmitJobRequestSchema, body, refuseSubmission);
  return parsed.extra_data ? { workflow: parsed.workflow, extraData: parsed.extra_data } : { workflow: parsed.workflow };
}

export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !isIdempotencyKey(value)) throw ApiError.invalid('Idempotency-Key must be 1 to 255 visible ASCII characters.');
  return value;
}

/** `Prefer: wait=N` in seconds, capped; undefined when absent. */
export function parsePreferWait(header: string | string[] | undefined, max: number): number | undefined {
  const value = Array.isArray(header) ? header.join(',') : header;
  if (!value) return undefined;
  // RFC 7240: the name in any case, optional spaces around '=', the value bare or quoted. Any
  // number of digits: a long wait is capped like any other, not ignored.
  const m = /(?:^|[,;\s])wait\s*=\s*("?)(\d{1,100})\1(?:$|[,;\s])/i.exec(value);
  if (!m) return undefined;
  return Math.min(Number(m[2]), max);
}
