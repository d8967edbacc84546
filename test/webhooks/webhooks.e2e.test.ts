import { randomUUID } from 'node:crypto';
import { startCloud, slowJob, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, envelopeCode, jsonInit, type Reply } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { ALLOW_LOOPBACK, WebhookReceiver, startWebhooks, verifyWebhook, type Received } from '../support/webhooks.js';

// Webhooks end to end: the API, a worker with its engine, the webhooks process and a real
// receiver on loopback. Every delivery is verified with the standardwebhooks library.

const ALL_EVENTS = ['job.succeeded', 'job.failed', 'job.canceled', 'job.expired', 'job.running', 'job.output'];

/** Saves an image at once, then sleeps: an output committed before the deadline, then a long run. */
function saveThenSleep(ms: number): Record<string, any> {
  return {
    '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 7 } },
    '2': { class_type: 'SaveImage', inputs: { images: ['1', 0], filename_prefix: 'early' } },
    '3': { class_type: 'SimSleep', inputs: { source: ['1', 0], ms } },
  };
}

const failing = {
  '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 1, color: 1 } },
  '2': { class_type: 'SimFail', inputs: { exception_type: 'RuntimeError', message: 'made to fail', source: ['1', 0] } },
};

describe('webhooks', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let webhooks: RunningProcess;
  let receiver: WebhookReceiver;
  let api: string;
  let account: { id: string; key: string };

  const v2 = (path: string, init: RequestInit = {}, key = account.key) => call(`${api}${path}`, { ...init, headers: { ...bearer(key), ...(init.headers as Record<string, string>) } });
  const createEndpoint = async (body: Record<string, unknown>, key = account.key): Promise<{ id: string; secret: string; events: string[] }> => {
    const r = await v2('/api/v2/webhooks/endpoints', jsonInit('POST', body), key);
    expect(r.status).toBe(201);
    return r.body;
  };
  const submit = (workflow: unknown, headers: Record<string, string> = {}, key = account.key) => v2('/api/v2/jobs', jsonInit('POST', { workflow }, headers), key);
  const jobStatus = async (id: string) => (await v2(`/api/v2/jobs/${id}`)).body;
  const deliveriesOf = async (endpointId: string): Promise<any[]> => (await v2(`/api/v2/webhooks/endpoints/${endpointId}/deliveries?limit=100`)).body.data;
  const eventsFor = (path: string, jobId: string) => receiver.at(path).filter((r) => r.json?.data?.id === jobId);

  beforeAll(async () => {
    await stack.open();
    receiver = await WebhookReceiver.start();
    cloud = await startCloud(stack, { api: ALLOW_LOOPBACK });
    api = cloud.api.url;
    webhooks = await startWebhooks(stack, api);
    account = await stack.account({ name: 'hooked' });
  }, 60_000);

  afterAll(async () => {
    await receiver?.close();
    await stack.close();
  });

  describe('endpoints', () => {
    it('are created with a Standard Webhooks secret shown once, and the terminal events by default', async () => {
      const r = await v2('/api/v2/webhooks/endpoints', jsonInit('POST', { url: receiver.url('/crud'), description: 'ci' }));
      expect(r.status).toBe(201);
      expect(r.body).toMatchObject({ url: receiver.url('/crud'), events: ['job.succeeded', 'job.failed', 'job.canceled', 'job.expired'], enabled: true, description: 'ci', disabled_reason: null });
      expect(r.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
      // Kept sealed: nothing of the endpoint's row holds the secret.
      const row = await stack.db.webhookEndpoint.findUniqueOrThrow({ where: { id: r.body.id } });
      expect(JSON.stringify(row)).not.toContain(r.body.secret.slice('whsec_'.length, 20));
      const read = await v2(`/api/v2/webhooks/endpoints/${r.body.id}`);
      expect(read.status).toBe(200);
      expect(read.body.secret).toBeUndefined();
      expect(read.body).toEqual({ ...r.body, secret: undefined, updated_at: read.body.updated_at });

      const patched = await v2(`/api/v2/webhooks/endpoints/${r.body.id}`, jsonInit('PATCH', { events: ['job.output', 'job.running'], enabled: false, description: '' }));
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ events: ['job.output', 'job.running'], enabled: false, description: '' });
      expect((await v2(`/api/v2/webhooks/endpoints/${r.body.id}`, { method: 'DELETE' })).status).toBe(204);
      const gone = await v2(`/api/v2/webhooks/endpoints/${r.body.id}`);
      expect([gone.status, envelopeCode(gone)]).toEqual([404, 'not_found']);
      expect((await v2(`/api/v2/webhooks/endpoints/${r.body.id}`, { method: 'DELETE' })).status).toBe(404);
    });

    it.each([
      ['no url', {}],
      ['a relative url', { url: '/hook' }],
      ['another scheme', { url: 'ftp://127.0.0.1/hook' }],
      ['credentials in the url', { url: 'http://user:pass@127.0.0.1/hook' }],
      ['an address outside the allowed ranges', { url: 'http://10.1.2.3/hook' }],
      ['the metadata address', { url: 'http://169.254.169.254/latest/meta-data/' }],
      ['an unknown event', { url: 'http://127.0.0.1/hook', events: ['job.queued'] }],
      ['no events', { url: 'http://127.0.0.1/hook', events: [] }],
      ['events not a list', { url: 'http://127.0.0.1/hook', events: 'job.succeeded' }],
      ['an unknown field', { url: 'http://127.0.0.1/hook', secret: 'whsec_mine' }],
      ['a long description', { url: 'http://127.0.0.1/hook', description: 'x'.repeat(501) }],
      ['a url too long', { url: `http://127.0.0.1/${'a'.repeat(2048)}` }],
    ])('refuse %s with 400 in the envelope', async (_what, body) => {
      const r = await v2('/api/v2/webhooks/endpoints', jsonInit('POST', body));
      expect([r.status, envelopeCode(r)]).toEqual([400, 'invalid_request']);
    });

    it('refuse a body that is not JSON, and a bad patch, in the envelope', async () => {
      const notJson = await v2('/api/v2/webhooks/endpoints', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'url=x' });
      expect([notJson.status, envelopeCode(notJson)]).toEqual([415, 'unsupported_media_type']);
      const e = await createEndpoint({ url: receiver.url('/patch') });
      for (const body of [{ enabled: 'yes' }, { url: 'gopher://x' }, { events: ['nope'] }, { id: randomUUID() }]) {
        const r = await v2(`/api/v2/webhooks/endpoints/${e.id}`, jsonInit('PATCH', body));
        expect([r.status, envelopeCode(r)]).toEqual([400, 'invalid_request']);
      }
      const unknown = await v2(`/api/v2/webhooks/endpoints/${randomUUID()}`, jsonInit('PATCH', { enabled: 'yes' }));
      expect([unknown.status, envelopeCode(unknown)]).toEqual([404, 'not_found']);
      const notUuid = await v2('/api/v2/webhooks/endpoints/not-a-uuid');
      expect([notUuid.status, envelopeCode(notUuid)]).toEqual([404, 'not_found']);
    });

    it('list newest first a page at a time, and an account has at most 20', async () => {
      const owner = await stack.account({ name: 'many-hooks' });
      const made: string[] = [];
      for (let i = 0; i < 20; i++) made.push((await createEndpoint({ url: receiver.url(`/many/${i}`) }, owner.key)).id);
      const over = await v2('/api/v2/webhooks/endpoints', jsonInit('POST', { url: receiver.url('/many/20') }), owner.key);
      expect([over.status, envelopeCode(over)]).toEqual([400, 'invalid_request']);
      expect(over.body.error.message).toMatch(/at most 20/);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page: Reply = await v2(`/api/v2/webhooks/endpoints?limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {}, owner.key);
        expect(page.status).toBe(200);
        seen.push(...page.body.data.map((e: { id: string }) => e.id));
        cursor = page.body.has_more ? page.body.next_cursor : undefined;
      } while (cursor);
      expect(seen).toEqual([...made].reverse());
      const forged = await v2('/api/v2/webhooks/endpoints?cursor=abc.def', {}, owner.key);
      expect([forged.status, envelopeCode(forged)]).toEqual([400, 'invalid_request']);
    });
  });

  it('delivers each event type, signed, with the Job as GET shows it; verified with standardwebhooks', async () => {
    const e = await createEndpoint({ url: receiver.url('/all'), events: ALL_EVENTS });

    const ok = await submit(tinyImage(3), { prefer: 'wait=30' });
    expect(ok.body.status).toBe('succeeded');
    const bad = await submit(failing, { prefer: 'wait=30' });
    expect(bad.body.status).toBe('failed');
    const slow = await submit(slowJob(60_000));
    await waitUntil(async () => (await jobStatus(slow.body.id)).status === 'running', 20_000, 'slow job running');
    const canceled = await v2(`/api/v2/jobs/${slow.body.id}/cancel`, { method: 'POST' });
    expect(['canceling', 'canceled']).toContain(canceled.body.status);
    const late = await submit(slowJob(60_000), { 'cancel-after': '1s' });
    expect(late.status).toBe(201);
    const test = await v2(`/api/v2/webhooks/endpoints/${e.id}/test`, { method: 'POST' });
    expect(test.status).toBe(202);
    expect(test.body).toMatchObject({ event: 'webhook.test', status: 'pending', job_id: null });

    const expected: [string, string][] = [
      [ok.body.id, 'job.running'], [ok.body.id, 'job.output'], [ok.body.id, 'job.succeeded'],
      [bad.body.id, 'job.running'], [bad.body.id, 'job.failed'],
      [slow.body.id, 'job.running'], [slow.body.id, 'job.canceled'],
      [late.body.id, 'job.running'], [late.body.id, 'job.expired'],
    ];
    const has = (jobId: string, type: string) => receiver.at('/all').some((r) => r.json?.type === type && r.json?.data?.id === jobId);
    await receiver.waitFor(() => expected.every(([id, type]) => has(id, type)) && receiver.at('/all').some((r) => r.json?.type === 'webhook.test'), 30_000, 'every event type');

    for (const r of receiver.at('/all')) {
      expect(verifyWebhook(e.secret, r)).toEqual(r.json);
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
      expect(Object.keys(r.json).sort()).toEqual(r.json.type === 'job.output' ? ['data', 'output', 'timestamp', 'type'] : ['data', 'timestamp', 'type']);
    }
    const test1 = receiver.at('/all').find((r) => r.json.type === 'webhook.test')!;
    expect(test1.headers['webhook-id']).toBe(test.body.id);
    expect(test1.json.data.endpoint_id).toBe(e.id);

    // `data` is the Job as GET answers it (links absolute here: PUBLIC_URL is set), with output
    // URLs signed afresh that download without credentials.
    const succeeded = eventsFor('/all', ok.body.id).find((r) => r.json.type === 'job.succeeded')!.json;
    const polled = await jobStatus(ok.body.id);
    expect(succeeded.data).toEqual({
      ...polled,
      urls: Object.fromEntries(Object.entries(polled.urls).map(([k, v]) => [k, `${api}${v as string}`])),
      outputs: polled.outputs.map((o: Record<string, unknown>) => ({ ...o, url: expect.any(String), url_expires_at: expect.any(String) })),
    });
    const download = await fetch(succeeded.data.outputs[0].url);
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).subarray(1, 4).toString()).toBe('PNG');
    const output = eventsFor('/all', ok.body.id).find((r) => r.json.type === 'job.output')!.json;
    expect(output.output).toMatchObject({ id: polled.outputs[0].id, name: polled.outputs[0].name, hash: polled.outputs[0].hash, job_id: ok.body.id });
    expect(Date.parse(succeeded.timestamp)).toBeGreaterThanOrEqual(Date.parse(polled.completed_at) - 5);

    expect(eventsFor('/all', bad.body.id).find((r) => r.json.type === 'job.failed')!.json.data.error).toMatchObject({ code: 'node_execution_error' });
    expect(eventsFor('/all', late.body.id).find((r) => r.json.type === 'job.expired')!.json.data.error).toMatchObject({ code: 'deadline_exceeded' });

    // Every delivery is recorded, one per event, succeeded on its first attempt.
    const records = await deliveriesOf(e.id);
    expect(records.length).toBe(receiver.at('/all').length);
    for (const d of records) expect(d).toMatchObject({ status: 'succeeded', attempts: 1, response_code: 200, error: null, next_attempt_at: null });
    expect(new Set(records.map((d) => d.id))).toEqual(new Set(receiver.at('/all').map((r) => r.headers['webhook-id'])));
  }, 90_000);

  it('sends an endpoint only the events it subscribed to, and none to a disabled one', async () => {
    const terminal = await createEndpoint({ url: receiver.url('/terminal') });
    expect(terminal.events).toEqual(['job.succeeded', 'job.failed', 'job.canceled', 'job.expired']);
    const off = await createEndpoint({ url: receiver.url('/off'), events: ALL_EVENTS });
    await v2(`/api/v2/webhooks/endpoints/${off.id}`, jsonInit('PATCH', { enabled: false }));
    const job = await submit(tinyImage(4), { prefer: 'wait=30' });
    await receiver.waitFor(() => eventsFor('/terminal', job.body.id).length > 0, 20_000, 'the succeeded event');
    await new Promise((r) => setTimeout(r, 500));
    expect(eventsFor('/terminal', job.body.id).map((r) => r.json.type)).toEqual(['job.succeeded']);
    expect(receiver.at('/off')).toEqual([]);
    expect(await deliveriesOf(off.id)).toEqual([]);
  }, 40_000);

  it('retries a 500 and then succeeds, with the same webhook-id on every attempt', async () => {
    receiver.answer('/flaky', (_r, nth) => (nth <= 2 ? { status: 500, body: 'down for a moment' } : { status: 204 }));
    const e = await createEndpoint({ url: receiver.url('/flaky') });
    const job = await submit(tinyImage(5), { prefer: 'wait=30' });
    await receiver.waitFor(() => receiver.at('/flaky').length >= 3, 20_000, 'three attempts');
    const attempts = receiver.at('/flaky');
    expect(new Set(attempts.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of attempts) expect(verifyWebhook(e.secret, r)).toMatchObject({ type: 'job.succeeded', data: { id: job.body.id } });
    // 5 s and 5 min, scaled by 0.01: 50 ms, then 3 s.
    expect(attempts[2]!.at - attempts[1]!.at).toBeGreaterThanOrEqual(2_900);
    await waitUntil(async () => (await deliveriesOf(e.id))[0]?.status === 'succeeded', 5_000, 'the delivery recorded');
    expect((await deliveriesOf(e.id))[0]).toMatchObject({ id: attempts[0]!.headers['webhook-id'], event: 'job.succeeded', job_id: job.body.id, status: 'succeeded', attempts: 3, response_code: 204, error: null });
  }, 40_000);

  it('honours Retry-After on a 429, and records what a failing receiver answered', async () => {
    receiver.answer('/busy', (_r, nth) => (nth === 1 ? { status: 429, headers: { 'retry-after': '2' }, body: 'slow down' } : { status: 200 }));
    const e = await createEndpoint({ url: receiver.url('/busy') });
    await submit(tinyImage(6), { prefer: 'wait=30' });
    await receiver.waitFor(() => receiver.at('/busy').length >= 1, 20_000, 'the first attempt');
    await waitUntil(async () => (await deliveriesOf(e.id))[0]?.attempts === 1, 5_000, 'the 429 recorded');
    expect((await deliveriesOf(e.id))[0]).toMatchObject({ status: 'pending', response_code: 429, error: 'HTTP 429: slow down' });
    await receiver.waitFor(() => receiver.at('/busy').length >= 2, 20_000, 'the retry');
    const [first, second] = receiver.at('/busy');
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1_900);
  }, 40_000);

  it('does not retry other 4xx answers, and a redelivery sends the same event again', async () => {
    let broken = true;
    receiver.answer('/strict', () => (broken ? { status: 400, body: 'bad signature?' } : { status: 200 }));
    const e = await createEndpoint({ url: receiver.url('/strict') });
    const job = await submit(tinyImage(8), { prefer: 'wait=30' });
    await waitUntil(async () => (await deliveriesOf(e.id))[0]?.status === 'failed', 20_000, 'the final failure');
    const [failed] = await deliveriesOf(e.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, response_code: 400, error: 'HTTP 400: bad signature?', next_attempt_at: null });
    await new Promise((r) => setTimeout(r, 300));
    expect(receiver.at('/strict').length).toBe(1);

    broken = false;
    const again = await v2(`/api/v2/webhooks/deliveries/${failed.id}/redeliver`, { method: 'POST' });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ id: failed.id, status: 'pending', attempts: 0 });
    await waitUntil(async () => (await deliveriesOf(e.id))[0]?.status === 'succeeded', 10_000, 'the redelivery');
    const [first, second] = receiver.at('/strict');
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(verifyWebhook(e.secret, second!)).toMatchObject({ type: 'job.succeeded', data: { id: job.body.id } });
    const unknown = await v2(`/api/v2/webhooks/deliveries/${randomUUID()}/redeliver`, { method: 'POST' });
    expect([unknown.status, envelopeCode(unknown)]).toEqual([404, 'not_found']);
  }, 40_000);

  it('disables an endpoint that answers 410 and says why', async () => {
    receiver.answer('/gone', () => ({ status: 410 }));
    const e = await createEndpoint({ url: receiver.url('/gone') });
    await submit(tinyImage(9), { prefer: 'wait=30' });
    await waitUntil(async () => (await v2(`/api/v2/webhooks/endpoints/${e.id}`)).body.enabled === false, 20_000, 'the endpoint disabled');
    const endpoint = (await v2(`/api/v2/webhooks/endpoints/${e.id}`)).body;
    expect(endpoint.disabled_reason).toMatch(/410 Gone/);
    expect((await deliveriesOf(e.id))[0]).toMatchObject({ status: 'failed', attempts: 1, response_code: 410 });
    // Nothing more is sent to it, and a test event is refused until it is enabled again.
    await submit(tinyImage(10), { prefer: 'wait=30' });
    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.at('/gone').length).toBe(1);
    const test = await v2(`/api/v2/webhooks/endpoints/${e.id}/test`, { method: 'POST' });
    expect([test.status, envelopeCode(test)]).toEqual([400, 'invalid_request']);
    receiver.answer('/gone', () => ({ status: 200 }));
    const enabled = await v2(`/api/v2/webhooks/endpoints/${e.id}`, jsonInit('PATCH', { enabled: true }));
    expect(enabled.body).toMatchObject({ enabled: true, disabled_reason: null });
    expect((await v2(`/api/v2/webhooks/endpoints/${e.id}/test`, { method: 'POST' })).status).toBe(202);
    await receiver.waitFor(() => receiver.at('/gone').some((r) => r.json?.type === 'webhook.test'), 10_000, 'the test event');
  }, 40_000);

  it('signs with the old and the new secret during a rotation: receivers holding either verify', async () => {
    const e = await createEndpoint({ url: receiver.url('/rotate') });
    const rotated = await v2(`/api/v2/webhooks/endpoints/${e.id}/rotate-secret`, { method: 'POST' });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(e.secret);
    await v2(`/api/v2/webhooks/endpoints/${e.id}/test`, { method: 'POST' });
    await receiver.waitFor(() => receiver.at('/rotate').length > 0, 10_000, 'the test event');
    const r: Received = receiver.at('/rotate')[0]!;
    expect(r.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(verifyWebhook(e.secret, r)).toMatchObject({ type: 'webhook.test' });
    expect(verifyWebhook(rotated.body.secret, r)).toMatchObject({ type: 'webhook.test' });
    expect(() => verifyWebhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, r)).toThrow();
  });

  it('exports deliveries by outcome, attempts by result and the oldest undelivered event on /metrics', async () => {
    receiver.answer('/stuck', () => ({ status: 503 }));
    const e = await createEndpoint({ url: receiver.url('/stuck') });
    await v2(`/api/v2/webhooks/endpoints/${e.id}/test`, { method: 'POST' });
    await receiver.waitFor(() => receiver.at('/stuck').length >= 2, 10_000, 'two attempts');
    await new Promise((r) => setTimeout(r, 1_100)); // scrapes reuse a collection for a second
    const text = await (await fetch(`${webhooks.url}/metrics`)).text();
    const value = (series: string) => Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    expect(value('webhook_deliveries_total{outcome="succeeded"}')).toBeGreaterThan(10);
    expect(value('webhook_deliveries_total{outcome="failed"}')).toBeGreaterThanOrEqual(2);
    expect(value('webhook_delivery_attempts_total{result="delivered"}')).toBeGreaterThan(10);
    expect(value('webhook_delivery_attempts_total{result="http_error"}')).toBeGreaterThanOrEqual(5);
    expect(value('webhook_oldest_pending_seconds')).toBeGreaterThan(1);
    await v2(`/api/v2/webhooks/endpoints/${e.id}`, { method: 'DELETE' });
  });

  describe('Cancel-After', () => {
    it('expires a running job at its deadline: the engine is interrupted, the output made before stays, only what ran is charged', async () => {
      const before = (await v2('/api/v2/account')).body.credit_balance;
      const job = await submit(saveThenSleep(120_000), { 'cancel-after': '3s' });
      expect(job.status).toBe(201);
      expect(Math.abs(Date.parse(job.body.deadline_at) - Date.parse(job.body.created_at) - 3_000)).toBeLessThan(1_000);
      await waitUntil(async () => (await jobStatus(job.body.id)).status === 'expired', 20_000, 'the job expired');
      const ended = await jobStatus(job.body.id);
      expect(ended.error).toMatchObject({ code: 'deadline_exceeded' });
      expect(ended.started_at).not.toBeNull();
      expect(Date.parse(ended.completed_at)).toBeLessThan(Date.parse(ended.deadline_at) + 2_000);
      expect(ended.outputs.map((o: { name: string }) => o.name)).toEqual([expect.stringMatching(/^early_/)]);
      // Charged for the seconds the engine worked (1 credit a second), not the two minutes asked for.
      const after = (await v2('/api/v2/account')).body.credit_balance;
      expect(before - after).toBeGreaterThanOrEqual(1);
      expect(before - after).toBeLessThanOrEqual(5);
      // The engine took the next job at once: it was interrupted, not left sleeping.
      expect((await submit(tinyImage(11), { prefer: 'wait=20' })).body.status).toBe('succeeded');
    }, 40_000);

    it('expires a queued job that never started, and shows deadline_at on every read', async () => {
      const solo = await stack.account({ name: 'one-at-a-time' });
      await stack.accounts.setLimits(solo.id, { maxConcurrentJobs: 1 });
      const blocker = await submit(slowJob(8_000), {}, solo.key);
      await waitUntil(async () => (await v2(`/api/v2/jobs/${blocker.body.id}`, {}, solo.key)).body.status === 'running', 20_000, 'the blocker running');
      const waiting = await submit(tinyImage(12), { 'cancel-after': '2' }, solo.key);
      expect(waiting.body).toMatchObject({ status: 'queued', deadline_at: expect.any(String) });
      await waitUntil(async () => (await v2(`/api/v2/jobs/${waiting.body.id}`, {}, solo.key)).body.status === 'expired', 15_000, 'the queued job expired');
      const ended = (await v2(`/api/v2/jobs/${waiting.body.id}`, {}, solo.key)).body;
      expect(ended).toMatchObject({ status: 'expired', started_at: null, error: { code: 'deadline_exceeded' }, deadline_at: waiting.body.deadline_at });
      const listed = (await v2('/api/v2/jobs?limit=5', {}, solo.key)).body.data.find((j: { id: string }) => j.id === waiting.body.id);
      expect(listed.deadline_at).toBe(waiting.body.deadline_at);
      const ledger = (await v2('/api/v2/account?limit=100', {}, solo.key)).body.charges.data;
      expect(ledger.filter((c: { ref: string }) => c.ref === waiting.body.id)).toEqual([]);
    }, 40_000);

    it('is capped by the tier, absent without the header, and a bad value is 400 in the envelope', async () => {
      const free = await stack.account({ name: 'free-tier', tier: 'free' });
      // Counted from the submission's arrival; created_at is the moment its row was written, a little later.
      const from = (job: Reply) => Date.parse(job.body.deadline_at) - Date.parse(job.body.created_at);
      const capped = await submit(tinyImage(13), { 'cancel-after': '48h' }, free.key);
      expect(Math.abs(from(capped) - 3600 * 1000)).toBeLessThan(1000);
      const pro = await submit(tinyImage(14), { 'cancel-after': '48h' });
      expect(Math.abs(from(pro) - 6 * 3600 * 1000)).toBeLessThan(1000);
      const asked = await submit(tinyImage(17), { 'cancel-after': '1h30m' });
      expect(Math.abs(from(asked) - 5400 * 1000)).toBeLessThan(1000);
      expect((await submit(tinyImage(15))).body.deadline_at).toBeNull();
      for (const value of ['soon', '0', '1.5h', '-3', '5d']) {
        const r = await submit(tinyImage(16), { 'cancel-after': value });
        expect([value, r.status, envelopeCode(r)]).toEqual([value, 400, 'invalid_request']);
      }
    });
  });
});
