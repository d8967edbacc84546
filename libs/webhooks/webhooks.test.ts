import { Webhook } from 'standardwebhooks';
import { MAX_ATTEMPTS, classifyStatus, isRetryable, nextDelayMs, parseRetryAfter } from './schedule.js';
import { newEndpointSecret, openEndpointSecret, sealEndpointSecret, signedHeaders } from './secrets.js';

describe('the retry schedule', () => {
  it('is the Standard Webhooks one: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    const delays = Array.from({ length: MAX_ATTEMPTS }, (_, i) => nextDelayMs(i + 1, 1));
    expect(delays).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000, null]);
    expect(MAX_ATTEMPTS).toBe(8);
  });

  it('scales for tests, and waits at least a Retry-After', () => {
    expect(nextDelayMs(1, 0.01)).toBe(50);
    expect(nextDelayMs(2, 0.01)).toBe(3_000);
    expect(nextDelayMs(1, 0.01, 2_000)).toBe(2_000);
    expect(nextDelayMs(3, 1, 2_000)).toBe(1_800_000);
    expect(nextDelayMs(8, 1, 2_000)).toBeNull();
  });

  it('retries timeouts, connection errors, 408, 429 and 5xx; not other answers', () => {
    for (const status of [408, 429, 500, 502, 503, 504]) expect({ status, retry: isRetryable(classifyStatus(status, undefined)) }).toEqual({ status, retry: true });
    for (const status of [301, 302, 307, 400, 401, 403, 404, 410, 413, 422]) expect({ status, retry: isRetryable(classifyStatus(status, undefined)) }).toEqual({ status, retry: false });
    expect(classifyStatus(204, undefined)).toEqual({ kind: 'delivered', status: 204 });
    expect(isRetryable({ kind: 'timeout' })).toBe(true);
    expect(isRetryable({ kind: 'connection_error', message: 'ECONNREFUSED' })).toBe(true);
    expect(isRetryable({ kind: 'blocked_address', message: 'loopback' })).toBe(false);
  });

  it('reads Retry-After as seconds or an HTTP date, and bounds it to a day', () => {
    const now = Date.parse('2026-11-30T10:00:00Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Mon, 30 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Mon, 30 Nov 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('9999999', now)).toBe(24 * 3600 * 1000);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
    expect(classifyStatus(429, '7', now)).toEqual({ kind: 'retryable_status', status: 429, retryAfterMs: 7_000 });
  });
});

describe('endpoint secrets', () => {
  it('are Standard Webhooks secrets, sealed at rest and opened only with the same SIGNING_SECRET', () => {
    const secret = newEndpointSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(newEndpointSecret()).not.toBe(secret);
    const sealed = sealEndpointSecret('signing-secret-0123456789', secret);
    expect(sealed).not.toContain(secret.slice(6));
    expect(openEndpointSecret('signing-secret-0123456789', sealed)).toBe(secret);
    expect(() => openEndpointSecret('another-secret-0123456789', sealed)).toThrow();
  });

  it('sign what the standardwebhooks library verifies, with every secret during a rotation', () => {
    const [a, b] = [newEndpointSecret(), newEndpointSecret()];
    const body = JSON.stringify({ type: 'job.succeeded', timestamp: new Date().toISOString(), data: { id: 'j' } });
    const headers = signedHeaders([b, a], 'msg-1', new Date(), body);
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(new Webhook(a).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(b).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newEndpointSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(a).verify(`${body} `, headers)).toThrow();
  });
});
