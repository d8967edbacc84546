import { createHmac, timingSafeEqual } from 'node:crypto';

// Opaque, tamper-evident page cursors: a payload plus its HMAC, in URL-safe base64. A cursor
// that was altered, truncated or minted for another purpose does not decode.

export function encodeCursor(secret: string, purpose: string, payload: unknown): string {
  const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
  const mac = createHmac('sha256', secret).update(`${purpose}.${body}`).digest('base64url').slice(0, 22);
  return `${body}.${mac}`;
}

export function decodeCursor<T>(secret: string, purpose: string, cursor: string): T | null {
  if (cursor.length > 512) return null;
  const dot = cursor.lastIndexOf('.');
  if (dot <= 0) return null;
  const body = cursor.slice(0, dot);
  const given = Buffer.from(cursor.slice(dot + 1));
  const expected = Buffer.from(createHmac('sha256', secret).update(`${purpose}.${body}`).digest('base64url').slice(0, 22));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  try {
    return JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as T;
  } catch {
    return null;
  }
}
