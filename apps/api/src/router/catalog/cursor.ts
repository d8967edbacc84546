import { createHmac, timingSafeEqual } from 'node:crypto';

// Page cursors are opaque to callers and tamper-evident: the position is signed together with the
// workspace it was issued to, so an edited cursor, one from another workspace or from another
// deployment (other secret) is refused. The position is a model id (keyset pagination), which is
// what keeps a walk correct while models are added and removed under it.

const MAX_AGE_MS = 24 * 3600 * 1000;
const VERSION = 'c1';

export class CursorError extends Error {}

export class CursorCodec {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = createHmac('sha256', secret).update('router-page-cursor').digest();
  }

  encode(accountId: string, afterId: string, now = Date.now()): string {
    const payload = Buffer.from(JSON.stringify({ a: afterId, t: now })).toString('base64url');
    return `${VERSION}.${payload}.${this.sign(accountId, payload)}`;
  }

  /** The model id the next page starts after; throws CursorError when the cursor is not ours. */
  decode(accountId: string, cursor: string, now = Date.now()): string {
    if (cursor.length < 1 || cursor.length > 512 || !/^[A-Za-z0-9._~+/=-]+$/.test(cursor)) throw new CursorError('malformed');
    const [version, payload, signature, extra] = cursor.split('.');
    if (version !== VERSION || !payload || !signature || extra !== undefined) throw new CursorError('malformed');
    const expected = Buffer.from(this.sign(accountId, payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw new CursorError('not issued to this workspace');
    let parsed: { a?: unknown; t?: unknown };
    try {
      parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { a?: unknown; t?: unknown };
    } catch {
      throw new CursorError('malformed');
    }
    if (typeof parsed.a !== 'string' || typeof parsed.t !== 'number') throw new CursorError('malformed');
    if (now - parsed.t > MAX_AGE_MS || parsed.t - now > 60_000) throw new CursorError('expired');
    return parsed.a;
  }

  private sign(accountId: string, payload: string): string {
    return createHmac('sha256', this.key).update(accountId).update('\n').update(payload).digest('base64url');
  }
}
