import { decodeCursor, encodeCursor } from '#libs/auth';
import { ApiError, DEFAULT_PAGE_LIMIT } from '#libs/contracts';

// What every v2 list shares: `limit` (default 20, clamped to 100, zero or less the default) and an
// opaque cursor naming the last row of the previous page by (created_at, id), signed for one list
// and one account, so a cursor cannot be forged, moved to another list or used by another tenant.

/** The last row of a page, as the next page's query continues after it. */
export interface PageAfter {
  t: string;
  id: string;
}

/** The page a parsed list query asks for: its limit (the default when absent) and the row it continues after. */
export function pageAsked(q: { limit?: number; cursor?: string }, secret: string, purpose: string, accountId: string): { limit: number; after: PageAfter | null } {
  return { limit: q.limit ?? DEFAULT_PAGE_LIMIT, after: parsePageCursor(secret, purpose, accountId, q.cursor) };
}

/** The position a `cursor` parameter names, null without one; 400 for anything this list did not issue to this account. */
export function parsePageCursor(secret: string, purpose: string, accountId: string, raw: unknown): PageAfter | null {
  if (raw === undefined) return null;
  const decoded = typeof raw === 'string' ? decodeCursor<{ t: string; id: string; a: string }>(secret, purpose, raw) : null;
  // A cursor minted for another account is as good as a forged one.
  if (!decoded || decoded.a !== accountId || typeof decoded.t !== 'string' || typeof decoded.id !== 'string') {
    throw ApiError.invalid('cursor is not valid; use next_cursor from a previous page.');
  }
  return { t: decoded.t, id: decoded.id };
}

export function pageCursor(secret: string, purpose: string, accountId: string, last: { createdAt: Date; id: string | bigint }): string {
  return encodeCursor(secret, purpose, { t: last.createdAt.toISOString(), id: String(last.id), a: accountId });
}

/** One page in the shape of every v2 list: `limit + 1` rows were read to learn whether more follow. */
export function pageOf<R, V>(rows: R[], limit: number, view: V[], cursorOf: (last: R) => string): { data: V[]; has_more: boolean; next_cursor?: string; limit: number } {
  const hasMore = rows.length > limit;
  return { data: view, has_more: hasMore, ...(hasMore ? { next_cursor: cursorOf(rows[limit - 1]!) } : {}), limit };
}
