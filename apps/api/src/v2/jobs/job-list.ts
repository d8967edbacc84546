import { decodeCursor, encodeCursor } from '#libs/auth';
import { ApiError } from '#libs/contracts';
import type { JobStatus } from '#libs/db';
import type { JobPageQuery } from '../../jobs/job-views.service.js';

const STATUSES: JobStatus[] = ['queued', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'expired'];
const PURPOSE = 'v2-jobs';

export function parseJobListQuery(query: Record<string, unknown>, secret: string, accountId: string): JobPageQuery {
  const rawLimit = query.limit;
  let limit = 20;
  if (rawLimit !== undefined) {
    // Any whole number, however long: past 100 it is clamped, at or below zero the default.
    if (typeof rawLimit !== 'string' || !/^-?\d{1,100}$/.test(rawLimit)) throw ApiError.invalid('limit must be a whole number.');
    const n = Number(rawLimit);
    limit = n <= 0 ? 20 : Math.min(n, 100);
  }
  let statuses: JobStatus[] | null = null;
  if (query.status !== undefined) {
    const list = String(query.status).split(',').map((s) => s.trim()).filter(Boolean);
    const bad = list.filter((s) => !STATUSES.includes(s as JobStatus));
    if (bad.length > 0 || list.length === 0) throw ApiError.invalid(`status must be a comma-separated list of ${STATUSES.join(', ')}.`);
    statuses = list as JobStatus[];
  }
  let after: JobPageQuery['after'] = null;
  if (query.cursor !== undefined) {
    const decoded = typeof query.cursor === 'string' ? decodeCursor<{ t: string; id: string; a: string }>(secret, PURPOSE, query.cursor) : null;
    // A cursor minted for another account is as good as a forged one.
    if (!decoded || decoded.a !== accountId || typeof decoded.t !== 'string' || typeof decoded.id !== 'string') {
      throw ApiError.invalid('cursor is not valid; use next_cursor from a previous page.');
    }
    after = { t: decoded.t, id: decoded.id };
  }
  return { limit, statuses, after };
}

export function nextCursor(secret: string, accountId: string, last: { createdAt: Date; id: string }): string {
  return encodeCursor(secret, PURPOSE, { t: last.createdAt.toISOString(), id: last.id, a: accountId });
}
