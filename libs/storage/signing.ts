import { createHmac, timingSafeEqual } from 'node:crypto';

// Signed URLs of the local-directory store: the API serves them itself. The signature covers
// everything that shapes the response, so no parameter can be swapped without breaking it.

export interface BlobUrlParams {
  hash: string;
  expiresAt: number; // unix seconds
  fileName: string;
  contentType: string;
}

function mac(secret: string, p: BlobUrlParams): string {
  return createHmac('sha256', secret)
    .update(['blob', p.hash, String(p.expiresAt), p.fileName, p.contentType].join('\n'))
    .digest('base64url');
}

/** Returns the query string (without `?`) for a blob URL. */
export function signBlobUrl(secret: string, p: BlobUrlParams): string {
  const q = new URLSearchParams({
    exp: String(p.expiresAt),
    name: p.fileName,
    ct: p.contentType,
    sig: mac(secret, p),
  });
  return q.toString();
}

export type VerifyResult = { ok: true; params: BlobUrlParams } | { ok: false; reason: 'invalid' | 'expired' };

export function verifyBlobUrl(
  secret: string,
  hash: string,
  query: Record<string, string | string[] | undefined>,
  nowSeconds = Math.floor(Date.now() / 1000),
): VerifyResult {
  const { exp, name, ct, sig } = query;
  // A repeated parameter arrives as a list: `name=a&name=b` must not pass for a URL signed for "a,b".
  if (typeof exp !== 'string' || typeof name !== 'string' || typeof ct !== 'string' || typeof sig !== 'string') return { ok: false, reason: 'invalid' };
  if (!/^\d{1,12}$/.test(exp) || !sig) return { ok: false, reason: 'invalid' };
  const params: BlobUrlParams = { hash, expiresAt: Number(exp), fileName: name, contentType: ct };
  const expected = Buffer.from(mac(secret, params));
  const given = Buffer.from(sig);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { ok: false, reason: 'invalid' };
  if (params.expiresAt < nowSeconds) return { ok: false, reason: 'expired' };
  return { ok: true, params };
}
