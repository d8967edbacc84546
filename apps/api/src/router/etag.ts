/** RFC 9110 If-None-Match: weak comparison, `*` matches any current representation. */
export function ifNoneMatchHits(header: string | string[] | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const value = Array.isArray(header) ? header.join(',') : header;
  if (value.trim() === '*') return true;
  const opaque = etag.replace(/^W\//, '');
  for (const tag of value.match(/(?:W\/)?"[^"]*"/g) ?? []) {
    if (tag.replace(/^W\//, '') === opaque) return true;
  }
  return false;
}
