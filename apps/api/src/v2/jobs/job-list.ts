import { JobListQuerySchema } from '#libs/contracts';
import type { JobPageQuery } from '../../jobs/job-views.service.js';
import { pageAsked, pageCursor } from '../paging.js';
import { parseV2Input } from '../parse-input.js';

const PURPOSE = 'v2-jobs';

/** `limit`, `cursor` and `status` (a comma-separated list of JobStatus) of `GET /api/v2/jobs`. */
export function parseJobListQuery(query: unknown, secret: string, accountId: string): JobPageQuery {
  const q = parseV2Input(JobListQuerySchema, query);
  return { ...pageAsked(q, secret, PURPOSE, accountId), statuses: q.status ?? null };
}

export function nextCursor(secret: string, accountId: string, last: { createdAt: Date; id: string }): string {
  return pageCursor(secret, PURPOSE, accountId, last);
}
