/**
 * The Content-Disposition a download carries. A header value must be ASCII, so the name goes in
 * twice (RFC 6266): an ASCII stand-in for old clients, and `filename*` with the UTF-8 original.
 */
export function contentDisposition(fileName: string): string {
  const base = fileName.split('/').pop() || 'file';
  const ascii = base.replace(/[^\x20-\x7e]|["\\]/g, '_');
  // encodeURIComponent leaves ' ( ) * alone, which RFC 8187 does not allow unencoded.
  const utf8 = encodeURIComponent(base).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `inline; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}
