import { RouterIdempotencyKeySchema, RouterIfNoneMatchSchema } from '#libs/contracts';
import { ifNoneMatchHits } from './etag.js';

// The router's request headers as its handlers parse them, with their operations' declared schemas.

describe('router headers', () => {
  const routerRefusal = (header: unknown) => {
    const result = RouterIdempotencyKeySchema.safeParse(header);
    return result.success ? null : result.error.issues[0]!.message;
  };

  it('Idempotency-Key: 1 to 255 visible ASCII characters, a repeated header read joined', () => {
    expect(RouterIdempotencyKeySchema.parse(undefined)).toBeUndefined();
    expect(RouterIdempotencyKeySchema.parse('key-1')).toBe('key-1');
    expect(RouterIdempotencyKeySchema.parse(['a', 'b'])).toBe('a,b');
    for (const header of ['', 'a b', 'x'.repeat(256), ['a', ' b']]) expect(routerRefusal(header)).toBe('Idempotency-Key must be 1 to 255 visible ASCII characters.');
  });

  it('If-None-Match: `*` or the listed tags compared weakly; text naming no tag matches nothing', () => {
    const etag = '"abc"';
    const hits = (header: unknown) => ifNoneMatchHits(RouterIfNoneMatchSchema.parse(header), etag);
    expect(hits(undefined)).toBe(false);
    expect(hits(' * ')).toBe(true);
    expect(hits('"abc"')).toBe(true);
    expect(hits('W/"abc"')).toBe(true);
    expect(hits('"x", W/"abc"')).toBe(true);
    expect(hits(['"x"', '"abc"'])).toBe(true);
    expect(hits('"abcd"')).toBe(false);
    expect(hits('abc')).toBe(false);
    expect(ifNoneMatchHits(RouterIfNoneMatchSchema.parse('"abc"'), 'W/"abc"')).toBe(true);
  });
});
