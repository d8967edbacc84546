import type { z } from 'zod';
import { ApiError, SubmitJobRequestSchema } from '#libs/contracts';
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
