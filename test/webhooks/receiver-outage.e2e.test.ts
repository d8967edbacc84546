import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit } from '../support/http.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { ALLOW_LOOPBACK, WebhookReceiver, startWebhooks, verifyWebhook } from '../support/webhooks.js';

// A receiver down for the whole first minute after its events (the schedule scaled by 0.01: tries
// at 0, 0.05, 3, 21 and 93 s) gets every one of them once it is back, each under the id it was
// first tried with; two webhooks processes share the work and still send each event once.

describe('a webhook receiver down for a minute', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  const deliverers: RunningProcess[] = [];
  let receiver: WebhookReceiver;
  let account: { id: string; key: string };

  beforeAll(async () => {
    await stack.open();
    receiver = await WebhookReceiver.start();
    cloud = await startCloud(stack, { api: ALLOW_LOOPBACK });
    for (let i = 0; i < 2; i++) deliverers.push(await startWebhooks(stack, cloud.api.url));
    account = await stack.account({ name: 'outage' });
  }, 60_000);

  afterAll(async () => {
    await receiver?.close();
    await stack.close();
  });

  it('loses nothing, sends each event once when it is back, under the same ids', async () => {
    const v2 = (path: string, init: RequestInit = {}) => call(`${cloud.api.url}${path}`, { ...init, headers: { ...bearer(account.key), ...(init.headers as Record<string, string>) } });
    const endpoint = (await v2('/api/v2/webhooks/endpoints', jsonInit('POST', { url: receiver.url('/outage'), events: ['job.running', 'job.output', 'job.succeeded'] }))).body;
    await receiver.down();
    const down = Date.now();
    const jobs: string[] = [];
    for (let i = 0; i < 5; i++) {
      const job = await v2('/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(40 + i) }, { prefer: 'wait=30' }));
      expect(job.body.status).toBe('succeeded');
      jobs.push(job.body.id);
    }
    const deliveries = async () => (await v2(`/api/v2/webhooks/endpoints/${endpoint.id}/deliveries?limit=100`)).body.data as any[];
    const pending = await deliveries();
    expect(pending).toHaveLength(15);
    for (const d of pending) expect(d.status).toBe('pending');

    // Down for a whole minute: every event was tried (refused connections) and is still pending.
    await new Promise((r) => setTimeout(r, Math.max(0, 60_000 - (Date.now() - down))));
    const before = await deliveries();
    for (const d of before) expect(d).toMatchObject({ status: 'pending', error: expect.stringMatching(/^Connection failed: ECONNREFUSED/) });
    expect(Math.min(...before.map((d) => d.attempts))).toBeGreaterThanOrEqual(3);
    expect(receiver.received).toEqual([]);

    await receiver.up();
    const ids = new Set(before.map((d) => d.id));
    await receiver.waitFor((all) => new Set(all.map((r) => r.headers['webhook-id'])).size >= ids.size, 60_000, 'every event after the outage');
    await new Promise((r) => setTimeout(r, 1000));
    const received = receiver.at('/outage');
    expect(new Set(received.map((r) => r.headers['webhook-id']))).toEqual(ids);
    // Once each: neither process sent an event the other had taken.
    expect(received).toHaveLength(ids.size);
    for (const r of received) verifyWebhook(endpoint.secret, r);
    for (const job of jobs) expect(received.filter((r) => r.json.data.id === job).map((r) => r.json.type).sort()).toEqual(['job.output', 'job.running', 'job.succeeded']);
    const after = await deliveries();
    for (const d of after) expect(d).toMatchObject({ status: 'succeeded', response_code: 200, error: null });
    // Each was tried on the schedule while the receiver was away, then once more.
    expect(Math.min(...after.map((d) => d.attempts))).toBeGreaterThanOrEqual(5);
  }, 180_000);
});
