import { startCloud, tinyImage, type Cloud } from '../support/cloud.js';
import { bearer, call, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import { ReliabilityReport } from '../support/reliability.js';
import { TestStack } from '../support/stack.js';
import { ALLOW_LOOPBACK, WebhookReceiver, startWebhooks, verifyWebhook } from '../support/webhooks.js';

/**
 * The webhooks process killed (SIGKILL) while it retries, with attempts in flight: the events are
 * in PostgreSQL, so the next process delivers every one, under the ids they were first tried with.
 */
const report = new ReliabilityReport('Faults: webhook delivery', 2.2);
afterAll(() => report.save());

describe('the webhooks process killed mid-retry', () => {
  const stack = new TestStack('local');
  let cloud: Cloud;
  let receiver: WebhookReceiver;
  let account: { id: string; key: string };
  // Short attempts, so deliveries held by the killed process are free again (their lease lapsed) within seconds.
  const env = { WEBHOOK_TIMEOUT_MS: '1000' };

  beforeAll(async () => {
    await stack.open();
    receiver = await WebhookReceiver.start();
    cloud = await startCloud(stack, { api: ALLOW_LOOPBACK });
    account = await stack.account({ name: 'killed-deliverer' });
  }, 60_000);

  afterAll(async () => {
    await receiver?.close();
    await stack.close();
  });

  it('loses no event: the next process delivers them all under the same ids', async () => {
    const v2 = (path: string, init: RequestInit = {}) => call(`${cloud.api.url}${path}`, { ...init, headers: { ...bearer(account.key), ...(init.headers as Record<string, string>) } });
    const endpoint = (await v2('/api/v2/webhooks/endpoints', jsonInit('POST', { url: receiver.url('/killed'), events: ['job.running', 'job.output', 'job.succeeded'] }))).body;
    // Failing, and every third attempt left hanging, so that some are in flight when the process dies.
    let healthy = false;
    receiver.answer('/killed', (_r, nth) => (healthy ? { status: 200 } : nth % 3 === 0 ? 'hang' : { status: 503, body: 'maintenance' }));
    const first = await startWebhooks(stack, cloud.api.url, env);
    const jobs: string[] = [];
    for (let i = 0; i < 6; i++) jobs.push((await v2('/api/v2/jobs', jsonInit('POST', { workflow: tinyImage(60 + i) }, { prefer: 'wait=30' }))).body.id);
    const ids = new Set((await stack.db.webhookDelivery.findMany({ where: { endpointId: endpoint.id }, select: { id: true } })).map((d) => d.id));
    expect(ids.size).toBe(18);
    // Mid-retry: every delivery tried at least twice, none delivered, some attempts under way.
    await waitUntil(async () => (await stack.db.webhookDelivery.count({ where: { endpointId: endpoint.id, attempts: { lt: 2 } } })) === 0, 20_000, 'two attempts each');
    const held = () => stack.db.webhookDelivery.count({ where: { endpointId: endpoint.id, leaseUntil: { gt: new Date() } } });
    // The count the wait saw, and the kill right after it: a second look could come after the
    // one-second attempts have ended.
    let inFlight = 0;
    await waitUntil(async () => (inFlight = await held()) > 0, 20_000, 'attempts of the third round under way');
    const triedBefore = new Set(receiver.at('/killed').map((r) => r.headers['webhook-id']));
    await first.stop('SIGKILL');

    healthy = true;
    const started = Date.now();
    await startWebhooks(stack, cloud.api.url, env);
    await waitUntil(async () => (await stack.db.webhookDelivery.count({ where: { endpointId: endpoint.id, status: 'succeeded' } })) === ids.size, 60_000, 'every event delivered');
    const seconds = (Date.now() - started) / 1000;
    const delivered = receiver.at('/killed').filter((r) => r.at >= started);
    const deliveredIds = new Set(delivered.map((r) => r.headers['webhook-id']));
    for (const r of delivered) verifyWebhook(endpoint.secret, r);
    const lost = [...ids].filter((id) => !deliveredIds.has(id));
    const unknown = [...deliveredIds].filter((id) => !ids.has(id!));
    const failed = await stack.db.webhookDelivery.count({ where: { endpointId: endpoint.id, status: { not: 'succeeded' } } });
    report.record({
      tried: 'SIGKILL of the webhooks process mid-retry (18 events of 6 jobs, receiver failing and hanging), a new process started, receiver healed',
      count: ids.size,
      outcome: `${inFlight} attempts in flight at the kill; all ${deliveredIds.size} events delivered by the new process within ${seconds.toFixed(1)} s under their first ids (${triedBefore.size} tried before the kill), ${lost.length} lost, ${delivered.length - deliveredIds.size} sent twice`,
      held: lost.length === 0 && unknown.length === 0 && failed === 0,
    });
    expect({ lost, unknown, failed }).toEqual({ lost: [], unknown: [], failed: 0 });
    expect(inFlight).toBeGreaterThan(0);
    expect(triedBefore).toEqual(ids);
    for (const job of jobs) expect([...new Set(delivered.filter((r) => r.json.data.id === job).map((r) => r.json.type))].sort()).toEqual(['job.output', 'job.running', 'job.succeeded']);
  }, 120_000);
});
