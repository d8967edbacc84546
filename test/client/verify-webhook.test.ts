import { Webhook } from 'standardwebhooks';
import { ComfyCloudError, verifyWebhook } from '../../clients/typescript/src/index.js';

// The client's pieces that need no server: verifyWebhook against signatures the standardwebhooks
// library makes (as the service does), and how answers of each surface become a ComfyCloudError.

const secret = `whsec_${Buffer.from('a secret of thirty-two bytes!!!!').toString('base64')}`;
const body = JSON.stringify({ type: 'job.succeeded', timestamp: '2026-11-30T10:00:01.234Z', data: { id: 'j1', status: 'succeeded' } });

function signed(at = new Date(), id = 'msg_1', signWith = secret) {
  const signature = new Webhook(signWith).sign(id, at, body);
  return { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': signature };
}

describe('verifyWebhook', () => {
  it('returns the event for Node, Fetch and plain headers, whatever their case, and for raw bytes', () => {
    const headers = signed();
    expect(verifyWebhook(headers, body, secret)).toMatchObject({ type: 'job.succeeded', data: { id: 'j1' } });
    expect(verifyWebhook(new Headers(headers), Buffer.from(body), secret)).toMatchObject({ type: 'job.succeeded' });
    const shouting = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
    expect(verifyWebhook(shouting, body, secret)).toMatchObject({ type: 'job.succeeded' });
  });

  it('accepts either secret during a rotation (two signatures, space-separated)', () => {
    const other = `whsec_${Buffer.from('the new secret, also 32 bytes...').toString('base64')}`;
    const headers = signed();
    const both = { ...headers, 'webhook-signature': `${signed(new Date(), 'msg_1', other)['webhook-signature']} ${headers['webhook-signature']}` };
    expect(verifyWebhook(both, body, secret)).toMatchObject({ type: 'job.succeeded' });
    expect(verifyWebhook(both, body, other)).toMatchObject({ type: 'job.succeeded' });
  });

  it('refuses a changed body, another secret, another id, an old timestamp and missing headers', () => {
    const headers = signed();
    expect(() => verifyWebhook(headers, body.replace('j1', 'j2'), secret)).toThrow();
    expect(() => verifyWebhook(headers, body, `whsec_${Buffer.from('x'.repeat(32)).toString('base64')}`)).toThrow();
    expect(() => verifyWebhook({ ...headers, 'webhook-id': 'msg_2' }, body, secret)).toThrow();
    expect(() => verifyWebhook(signed(new Date(Date.now() - 10 * 60_000)), body, secret)).toThrow();
    expect(() => verifyWebhook({ 'webhook-id': 'msg_1' }, body, secret)).toThrow();
  });
});

describe('ComfyCloudError.from', () => {
  const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers });

  it('reads the v2 envelope, its details and Retry-After', () => {
    const e = ComfyCloudError.from(answer(422, { 'retry-after': '2' }), { error: { code: 'idempotency_key_reuse', message: 'used', details: { job_id: 'j1' } } });
    expect(e).toMatchObject({ status: 422, code: 'idempotency_key_reuse', message: 'used', details: { job_id: 'j1' } });
    expect(e.retryAfterSeconds).toBe(2);
  });

  it('reads the router body, or its header when the body is a validation list', () => {
    expect(ComfyCloudError.from(answer(504), { detail: 'too slow', error_type: 'deadline_exceeded' })).toMatchObject({ code: 'deadline_exceeded', message: 'too slow' });
    const listed = ComfyCloudError.from(answer(422, { 'x-service-error-type': 'invalid_input' }), { detail: [{ loc: ['prompt'], msg: 'required' }] });
    expect(listed).toMatchObject({ code: 'invalid_input', message: expect.stringContaining('prompt') });
  });

  it('names anything else by its status', () => {
    const e = ComfyCloudError.from(answer(502), 'Bad Gateway from a proxy');
    expect(e).toMatchObject({ code: 'http_502', message: 'HTTP 502: Bad Gateway from a proxy' });
    expect(e.retryAfterSeconds).toBeNull();
  });
});
