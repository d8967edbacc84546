import { ComfyCloud, unwrap, verifyWebhook } from '../../clients/typescript/src/index.js';
import { startCloud, tinyImage } from '../support/cloud.js';
import { waitUntil } from '../support/jobs.js';
import { TestStack } from '../support/stack.js';
import { ALLOW_LOOPBACK, WebhookReceiver, startWebhooks, type Received } from '../support/webhooks.js';

// Webhook endpoints managed through the client, and what the service delivers verified with its
// verifyWebhook (Standard Webhooks), against the real API, worker and webhooks process.

describe('TypeScript client: webhooks and verifyWebhook', () => {
  const stack = new TestStack('local');
  let receiver: WebhookReceiver;
  let client: ComfyCloud;

  beforeAll(async () => {
    await stack.open();
    receiver = await WebhookReceiver.start();
    const cloud = await startCloud(stack, { api: ALLOW_LOOPBACK });
    await startWebhooks(stack, cloud.api.url);
    client = new ComfyCloud({ baseUrl: cloud.api.url, apiKey: (await stack.account()).key });
  }, 60_000);
  afterAll(async () => {
    await receiver?.close();
    await stack.close();
  });

  const arrived = async (path: string, check: (r: Received) => boolean) => {
    await receiver.waitFor((all) => all.some((r) => r.path === path && check(r)), 15_000, path);
    return receiver.at(path).filter(check).at(-1)!;
  };

  it('manages an endpoint and verifies what it receives; tampering, another secret or a stale timestamp fail', async () => {
    const created = unwrap(await client.api.POST('/api/v2/webhooks/endpoints', { body: { url: receiver.url('/a'), description: 'client' } }));
    expect(created.secret).toMatch(/^whsec_/);
    const id = created.id;
    expect(unwrap(await client.api.GET('/api/v2/webhooks/endpoints')).data.map((e) => e.id)).toEqual([id]);
    expect(unwrap(await client.api.GET('/api/v2/webhooks/endpoints/{id}', { params: { path: { id } } })).description).toBe('client');
    const patched = unwrap(await client.api.PATCH('/api/v2/webhooks/endpoints/{id}', { params: { path: { id } }, body: { events: ['job.succeeded', 'job.output'] } }));
    expect(patched.events.sort()).toEqual(['job.output', 'job.succeeded']);

    expect((await client.api.POST('/api/v2/webhooks/endpoints/{id}/test', { params: { path: { id } } })).response.status).toBe(202);
    const test = await arrived('/a', (r) => r.json?.type === 'webhook.test');
    expect(verifyWebhook(test.headers, test.body, created.secret!)).toMatchObject({ type: 'webhook.test', data: { endpoint_id: id } });
    expect(verifyWebhook(new Headers(test.headers), Buffer.from(test.body), created.secret!)).toMatchObject({ type: 'webhook.test' });
    expect(() => verifyWebhook(test.headers, test.body.replace('webhook.test', 'webhook.tset'), created.secret!)).toThrow();
    expect(() => verifyWebhook(test.headers, test.body, `whsec_${Buffer.from('another secret of 32 bytes......').toString('base64')}`)).toThrow();
    expect(() => verifyWebhook({ ...test.headers, 'webhook-timestamp': String(Math.floor(Date.now() / 1000) - 3600) }, test.body, created.secret!)).toThrow();

    // A job's events: the Job as GET answers it, verified.
    const job = await client.run({ workflow: tinyImage(3) });
    const succeeded = await arrived('/a', (r) => r.json?.type === 'job.succeeded' && r.json.data.id === job.id);
    const event = verifyWebhook<{ type: string; data: { id: string; status: string } }>(succeeded.headers, succeeded.body, created.secret!);
    expect(event.data).toMatchObject({ id: job.id, status: 'succeeded' });
    const output = await arrived('/a', (r) => r.json?.type === 'job.output' && r.json.data.id === job.id);
    expect(verifyWebhook(output.headers, output.body, created.secret!)).toMatchObject({ type: 'job.output' });

    // Deliveries, a redelivery under the same webhook-id, a rotation signing with both secrets.
    // The receiver may have the event a moment before the service has recorded its answer.
    const succeededDelivery = async () =>
      unwrap(await client.api.GET('/api/v2/webhooks/endpoints/{id}/deliveries', { params: { path: { id }, query: { status: 'succeeded' } } })).data.find(
        (d) => d.job_id === job.id && d.event === 'job.succeeded',
      );
    await waitUntil(async () => (await succeededDelivery()) !== undefined, 10_000, 'the delivery recorded as succeeded');
    const delivered = (await succeededDelivery())!;
    expect(delivered.id).toBe(succeeded.headers['webhook-id']);
    const before = receiver.at('/a').length;
    expect((await client.api.POST('/api/v2/webhooks/deliveries/{id}/redeliver', { params: { path: { id: delivered.id } } })).response.status).toBe(202);
    const again = await arrived('/a', (r) => receiver.received.indexOf(r) >= before && r.headers['webhook-id'] === delivered.id);
    expect(verifyWebhook(again.headers, again.body, created.secret!)).toMatchObject({ type: 'job.succeeded' });

    const rotated = unwrap(await client.api.POST('/api/v2/webhooks/endpoints/{id}/rotate-secret', { params: { path: { id } } }));
    expect(rotated.secret).not.toBe(created.secret);
    const count = receiver.at('/a').length;
    await client.api.POST('/api/v2/webhooks/endpoints/{id}/test', { params: { path: { id } } });
    const afterRotation = await arrived('/a', (r) => receiver.received.indexOf(r) >= count && r.json?.type === 'webhook.test');
    expect(verifyWebhook(afterRotation.headers, afterRotation.body, rotated.secret!)).toMatchObject({ type: 'webhook.test' });
    expect(verifyWebhook(afterRotation.headers, afterRotation.body, created.secret!)).toMatchObject({ type: 'webhook.test' });

    expect((await client.api.DELETE('/api/v2/webhooks/endpoints/{id}', { params: { path: { id } } })).response.status).toBe(204);
    const gone = await client.api.GET('/api/v2/webhooks/endpoints/{id}', { params: { path: { id } } });
    expect(gone.error?.error.code).toBe('not_found');
  });
});
