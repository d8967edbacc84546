import { ApiError } from '#libs/contracts';
import type { JobStatus } from '#libs/db';
import type { JobPageQuery } from '../../jobs/job-views.service.js';
import { pageCursor, parsePageCursor, parsePageLimit } from '../paging.js';

const STATUSES: JobStatus[] = ['queued', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'expired'];
const PURPOSE = 'v2-jobs';

export function parseJobListQuery(query: Record<string, unknown>, secret: string, accountId: string): JobPageQuery {
  const limit = parsePageLimit(query.limit);
  let statuses: JobStatus[] | null = null;
  if (query.status !== undefined) {
    const list = String(query.status).split(',').map((s) => s.trim()).filter(Boolean);
    const bad = list.filter((s) => !STATUSES.includes(s as JobStatus));
    if (bad.length > 0 || list.length === 0) throw ApiError.invalid(`status must be a comma-separated list of ${STATUSES.join(', ')}.`);
    statuses = list as JobStatus[];
  }
  return { limit, statuses, after: parsePageCursor(secret, PURPOSE, accountId, query.cursor) };
}

export function nextCursor(secret: string, accountId: string, last: { createdAt: Date; id: string }): string {
  return pageCursor(secret, PURPOSE, accountId, last);
}
