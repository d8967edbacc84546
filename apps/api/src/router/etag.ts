/**
 * RFC 9110 If-None-Match, as RouterIfNoneMatchSchema reads it: weak comparison, `*` matches any
 * current representation.
 */
export function ifNoneMatchHits(tags: '*' | string[] | undefined, etag: string): boolean {
  if (tags === undefined) return false;
  if (tags === '*') return true;
  return tags.includes(etag.replace(/^W\//, ''));
}
