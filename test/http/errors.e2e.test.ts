import { bearer, call, envelopeCode, jsonInit } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';

describe('errors and request ids', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;
  let key: string;

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi({ MAX_JSON_BODY_BYTES: '4096' });
    key = (await stack.account()).key;
  });
  afterAll(() => stack.close());

  const fromHash = (init: RequestInit) => call(`${api.url}/api/v2/assets/from-hash`, { method: 'POST', ...init });

  it('puts a request id on every response and keeps a well-formed one the client sent', async () => {
    for (const res of [
      await call(`${api.url}/healthz`),
      await call(`${api.url}/api/v2/assets/x`),
      await call(`${api.url}/no/such/route`),
      await fromHash({ headers: bearer(key, { 'content-type': 'application/json' }), body: '{' }),
    ]) {
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    }
    const mine = await call(`${api.url}/healthz`, { headers: { 'x-request-id': 'client-trace-42' } });
    expect(mine.headers.get('x-request-id')).toBe('client-trace-42');
    const odd = await call(`${api.url}/healthz`, { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(odd.headers.get('x-request-id')).not.toBe('bad id with spaces');
  });

  it('answers every authentication failure with 401 unauthorized', async () => {
    const url = `${api.url}/api/v2/assets/00000000-0000-4000-8000-000000000000`;
    const cases: Record<string, string>[] = [
      {},
      { authorization: 'Bearer' },
      { authorization: 'Bearer not-a-key' },
      { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
      { authorization: `Bearer cck_AAAAAAAA_${'A'.repeat(43)}` },
      { authorization: `bearer ${key}x` },
      { 'x-api-key': key }, // v2 takes the key only as a bearer token
    ];
    for (const headers of cases) {
      const res = await call(url, { headers });
      expect(res.status).toBe(401);
      expect(envelopeCode(res)).toBe('unauthorized');
      expect(res.text).not.toContain(key);
    }
    expect((await call(url, { headers: bearer(key) })).status).toBe(404);
  });

  it('answers malformed JSON with 400 invalid_json, once the caller is authenticated', async () => {
    const res = await fromHash({ headers: bearer(key, { 'content-type': 'application/json' }), body: '{"hash": ' });
    expect(res.status).toBe(400);
    expect(envelopeCode(res)).toBe('invalid_json');
    // Without a valid credential the credential is what is wrong, whatever the body.
    for (const headers of [{}, { authorization: 'Bearer not-a-key' }]) {
      for (const body of ['{"hash": ', '{"__proto__": {}}', '['.repeat(1000)]) {
        const refused = await fromHash({ headers: { ...headers, 'content-type': 'application/json' }, body });
        expect([body.slice(0, 20), refused.status, envelopeCode(refused)]).toEqual([body.slice(0, 20), 401, 'unauthorized']);
      }
    }
    const submit = await call(`${api.url}/api/v2/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' });
    expect([submit.status, envelopeCode(submit)]).toEqual([401, 'unauthorized']);
  });

  it('takes an empty body declared as JSON as no body: a bodyless operation works, one that needs a body says so', async () => {
    const json = bearer(key, { 'content-type': 'application/json' });
    const cancel = await call(`${api.url}/api/v2/jobs/00000000-0000-4000-8000-000000000000/cancel`, { method: 'POST', headers: json, body: '' });
    expect(cancel.status).toBe(404);
    expect(envelopeCode(cancel)).toBe('not_found');
    const empty = await fromHash({ headers: json, body: '' });
    expect(empty.status).toBe(400);
    expect(envelopeCode(empty)).toBe('invalid_request');
    expect(empty.body.error.message).toBe('The body must be a JSON object.');
  });

  it('answers a JSON route given another content type with 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await fromHash({ headers: bearer(key, { 'content-type': type }), body: 'hash=x' });
      expect(res.status).toBe(415);
      expect(envelopeCode(res)).toBe('unsupported_media_type');
    }
  });

  it('reads a +json media type as JSON, and only JSON types', async () => {
    const body = `{"hash": "blake3:${'0'.repeat(64)}"}`;
    const suffixed = await fromHash({ headers: bearer(key, { 'content-type': 'application/vnd.api+json; charset=utf-8' }), body });
    expect(envelopeCode(suffixed)).toBe('blob_not_found');
    const lookalike = await fromHash({ headers: bearer(key, { 'content-type': 'application/json-seq' }), body });
    expect(lookalike.status).toBe(415);
    expect(envelopeCode(lookalike)).toBe('unsupported_media_type');
  });

  it('answers JSON that is not an object with 400', async () => {
    for (const body of ['[]', '"text"', '42', 'null']) {
      const res = await fromHash({ headers: bearer(key, { 'content-type': 'application/json' }), body });
      expect(res.status).toBe(400);
      envelopeCode(res);
    }
  });

  it('answers an oversized body with 413 payload_too_large', async () => {
    const res = await fromHash(jsonInit('POST', { hash: 'x'.repeat(10_000) }, bearer(key)));
    expect(res.status).toBe(413);
    expect(envelopeCode(res)).toBe('payload_too_large');
  });

  it('answers an id that is not a UUID as it answers a missing one (404), and an unknown route with 404', async () => {
    const missing = (await call(`${api.url}/api/v2/jobs/00000000-0000-4000-8000-000000000000`, { headers: bearer(key) })).body;
    for (const id of ['123', 'not-a-uuid', "1' OR '1'='1", '%00']) {
      const job = await call(`${api.url}/api/v2/jobs/${id}/cancel`, { method: 'POST', headers: bearer(key) });
      expect(job.status).toBe(404);
      expect(job.body).toEqual(missing);
      const asset = await call(`${api.url}/api/v2/assets/${id}`, { headers: bearer(key) });
      expect(asset.status).toBe(404);
      expect(envelopeCode(asset)).toBe('not_found');
    }
    const route = await call(`${api.url}/api/v2/nothing-here`, { headers: bearer(key) });
    expect(route.status).toBe(404);
    expect(envelopeCode(route)).toBe('not_found');
  });

  it('without log capture, leaves out urls.logs and answers the logs path as if the job were gone', async () => {
    const quiet = await stack.startApi({ CAPTURE_LOGS: 'false' });
    const owner = await stack.account({ name: 'no-logs' });
    const job = await stack.db.job.create({
      data: { accountId: owner.id, workflow: {}, status: 'succeeded', startedAt: new Date(), completedAt: new Date(), expiresAt: new Date(Date.now() + 3_600_000) },
    });
    const read = await call(`${quiet.url}/api/v2/jobs/${job.id}`, { headers: bearer(owner.key) });
    expect(read.status).toBe(200);
    expect(read.body.urls).not.toHaveProperty('logs');
    const logs = await call(`${quiet.url}/api/v2/jobs/${job.id}/logs`, { headers: bearer(owner.key) });
    const gone = await call(`${quiet.url}/api/v2/jobs/00000000-0000-4000-8000-000000000000/logs`, { headers: bearer(owner.key) });
    expect(logs.status).toBe(404);
    expect(logs.body).toEqual(gone.body);
  });

  it('reports its dependencies on /readyz', async () => {
    const res = await call(`${api.url}/readyz`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ready', checks: { postgres: 'ok', redis: 'ok', storage: 'ok', load: 'ok' } });
  });
});
