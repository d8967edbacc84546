import { lookup } from 'node:dns/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { hostRefusal, newEndpointSecret, sealEndpointSecret } from '#libs/webhooks';
import { bearer, call, envelopeCode, jsonInit } from '../support/http.js';
import { waitUntil } from '../support/jobs.js';
import type { RunningProcess } from '../support/processes.js';
import { TestStack } from '../support/stack.js';
import { TEST_SIGNING_SECRET } from '../support/env.js';
import { ALLOW_LOOPBACK, WebhookReceiver, startWebhooks } from '../support/webhooks.js';

// What a webhook may call: the service's outbound policy (libs/outbound). The API refuses what it
// can see at once (a non-public IP literal, `localhost`, http in production); the webhooks process
// checks the address of every connection it makes, so a name that resolves to a non-public address
// is refused too, whatever the API saw. Loopback targets are allowed where OUTBOUND_ALLOW_LOOPBACK
// says so (tests, `npm start`), and then only when the URL names them. Redirects are not followed
// and answers are read only up to a cap.

describe('webhook outbound safety', () => {
  const stack = new TestStack('local');
  let receiver: WebhookReceiver;
  /** An API that takes loopback targets, so the deliverer's own check is what is tested. */
  let permissive: RunningProcess;
  /** An API with the shipped default: no non-public range allowed. */
  let strict: RunningProcess;
  let account: { id: string; key: string };

  const create = (api: RunningProcess, url: string) => call(`${api.url}/api/v2/webhooks/endpoints`, jsonInit('POST', { url }, bearer(account.key)));
  const deliveries = async (id: string) => (await call(`${permissive.url}/api/v2/webhooks/endpoints/${id}/deliveries`, { headers: bearer(account.key) })).body.data as any[];

  beforeAll(async () => {
    await stack.open();
    receiver = await WebhookReceiver.start();
    permissive = await stack.startApi(ALLOW_LOOPBACK);
    strict = await stack.startApi();
    account = await stack.account({ name: 'ssrf' });
  }, 60_000);

  afterAll(async () => {
    await receiver?.close();
    await stack.close();
  });

  it('judges IP literals: loopback, private, link-local, metadata and embedded addresses are not public', () => {
    const strict = { allowLoopback: false, requireHttps: false };
    const loopback = { allowLoopback: true, requireHttps: false };
    for (const host of ['127.0.0.1', '127.8.9.10', '[::1]', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '[fd00:ec2::254]', '100.100.100.200', '0.0.0.0', '[::]', '[::ffff:127.0.0.1]', '[::ffff:a00:1]', '[fe80::1]', '224.0.0.1', '[64:ff9b::a00:1]', '[2002:a00:1::]', 'localhost', 'LOCALHOST', 'api.localhost.']) {
      expect({ host, refused: hostRefusal(host, strict) !== null }).toEqual({ host, refused: true });
    }
    for (const host of ['93.184.215.14', '8.8.8.8', '[2606:4700:4700::1111]', 'hooks.example.com']) expect({ host, refused: hostRefusal(host, strict) }).toEqual({ host, refused: null });
    for (const host of ['127.0.0.1', '[::1]', '[::ffff:127.0.0.1]', 'localhost']) expect({ host, refused: hostRefusal(host, loopback) }).toEqual({ host, refused: null });
    for (const host of ['10.0.0.1', '169.254.169.254', '192.168.1.1']) expect({ host, refused: hostRefusal(host, loopback) !== null }).toEqual({ host, refused: true });
  });

  it('the API refuses non-public literal targets and localhost unless allowed', async () => {
    for (const url of [receiver.url('/x'), 'http://localhost:9/x', 'http://[::1]:9/x', 'http://10.0.0.1/x', 'http://169.254.169.254/latest/meta-data/', 'http://0x7f.1/x', 'http://[::ffff:7f00:1]/x']) {
      const r = await create(strict, url);
      expect({ url, status: r.status, code: envelopeCode(r) }).toEqual({ url, status: 400, code: 'invalid_request' });
      expect(r.body.error.message).toMatch(/public address|loopback/);
    }
    expect((await create(strict, 'https://hooks.example.com/comfy')).status).toBe(201);
    // Allowing loopback allows nothing else.
    for (const url of ['http://10.0.0.1/x', 'http://169.254.169.254/latest/meta-data/']) expect((await create(permissive, url)).status).toBe(400);
    expect((await create(permissive, receiver.url('/x'))).status).toBe(201);
  });

  it('production takes https targets only', async () => {
    const production = await stack.startApi({ NODE_ENV: 'production' });
    const r = await call(`${production.url}/api/v2/webhooks/endpoints`, jsonInit('POST', { url: 'http://hooks.example.com/comfy' }, bearer(account.key)));
    expect([r.status, envelopeCode(r)]).toEqual([400, 'invalid_request']);
    expect(r.body.error.message).toMatch(/https/);
    expect((await call(`${production.url}/api/v2/webhooks/endpoints`, jsonInit('POST', { url: 'https://hooks.example.com/comfy' }, bearer(account.key)))).status).toBe(201);
    await production.stop();
  });

  describe('the webhooks process with no range allowed', () => {
    let webhooks: RunningProcess;
    beforeAll(async () => {
      webhooks = await startWebhooks(stack, permissive.url, { OUTBOUND_ALLOW_LOOPBACK: 'false' });
    });
    afterAll(() => webhooks.stop());

    it('refuses loopback, private, metadata targets and a host name that resolves to loopback, at connect time', async () => {
      // This machine's own name resolves to a loopback address (/etc/hosts), as on most hosts.
      const own = hostname();
      expect((await lookup(own)).address).toMatch(/^127\.|^::1$/);
      // Private and metadata targets no API takes (saved, say, before a policy change) are put in
      // the database directly: the deliverer judges them again.
      const saved = async (url: string) =>
        (await stack.db.webhookEndpoint.create({ data: { accountId: account.id, url, events: ['job.succeeded'], secretSealed: sealEndpointSecret(TEST_SIGNING_SECRET, newEndpointSecret()) } })).id;
      const targets = [receiver.url('/ssrf-literal'), `http://[::1]:${receiver.port}/ssrf-v6`, `http://${own}:${receiver.port}/ssrf-name`];
      const ids: string[] = [];
      for (const url of targets) {
        const e = await create(permissive, url);
        expect(e.status).toBe(201);
        ids.push(e.body.id);
      }
      for (const url of ['http://10.0.0.1:9/ssrf', 'http://169.254.169.254/latest/meta-data/']) {
        targets.push(url);
        ids.push(await saved(url));
      }
      for (const id of ids) expect((await call(`${permissive.url}/api/v2/webhooks/endpoints/${id}/test`, { method: 'POST', headers: bearer(account.key) })).status).toBe(202);
      for (const [i, id] of ids.entries()) {
        await waitUntil(async () => (await deliveries(id))[0]?.status === 'failed', 10_000, `the refusal of ${targets[i]}`);
        expect({ url: targets[i], delivery: (await deliveries(id))[0] }).toEqual({
          url: targets[i],
          delivery: expect.objectContaining({ status: 'failed', attempts: 1, response_code: null, error: expect.stringMatching(/^Refused: .*(not a public address|loopback|not public)/) }),
        });
      }
      expect(receiver.received).toEqual([]);
    });
  });

  describe('the webhooks process allowing loopback', () => {
    let webhooks: RunningProcess;
    let elsewhere: Server;
    let elsewhereHits = 0;
    beforeAll(async () => {
      webhooks = await startWebhooks(stack, permissive.url, { WEBHOOK_MAX_RESPONSE_BYTES: '1024', WEBHOOK_TIMEOUT_MS: '1500' });
      elsewhere = createServer((_req, res) => {
        elsewhereHits++;
        res.end('followed');
      });
      await new Promise<void>((resolve) => elsewhere.listen(0, '127.0.0.1', resolve));
    });
    afterAll(async () => {
      await webhooks.stop();
      await new Promise((resolve) => elsewhere.close(resolve));
    });

    const testEvent = async (path: string, url = receiver.url(path)) => {
      const e = await create(permissive, url);
      expect(e.status).toBe(201);
      await call(`${permissive.url}/api/v2/webhooks/endpoints/${e.body.id}/test`, { method: 'POST', headers: bearer(account.key) });
      return e.body.id as string;
    };

    it('still refuses a host name that resolves to loopback: only loopback the URL names is allowed', async () => {
      const id = await testEvent(`/by-name`, `http://${hostname()}:${receiver.port}/by-name`);
      await waitUntil(async () => (await deliveries(id))[0]?.status === 'failed', 10_000, 'the refusal');
      expect((await deliveries(id))[0]).toMatchObject({ attempts: 1, error: expect.stringMatching(/^Refused: .*not public/) });
      expect(receiver.at('/by-name')).toEqual([]);
    });

    it('does not follow a redirect: a 3xx is a final answer', async () => {
      receiver.answer('/redirect', () => ({ status: 307, headers: { location: `http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/hook` } }));
      const id = await testEvent('/redirect');
      await waitUntil(async () => (await deliveries(id))[0]?.status === 'failed', 10_000, 'the redirect recorded');
      expect((await deliveries(id))[0]).toMatchObject({ attempts: 1, response_code: 307 });
      expect(elsewhereHits).toBe(0);
    });

    it('reads an answer only up to its cap, and keeps a short excerpt of a failure', async () => {
      receiver.answer('/huge', () => ({ status: 500, body: 'E'.repeat(5_000_000) }));
      const id = await testEvent('/huge');
      await waitUntil(async () => (await deliveries(id))[0]?.attempts >= 1, 10_000, 'the first attempt recorded');
      const [d] = await deliveries(id);
      expect(d).toMatchObject({ status: 'pending', response_code: 500 });
      expect(d.error).toBe(`HTTP 500: ${'E'.repeat(200)}`);
      expect(d.latency_ms).toBeLessThan(1500);
    });

    it('gives up on a receiver that does not answer within the timeout, and retries it', async () => {
      receiver.answer('/hang', (_r, nth) => (nth === 1 ? 'hang' : { status: 200 }));
      const id = await testEvent('/hang');
      await waitUntil(async () => (await deliveries(id))[0]?.status === 'succeeded', 15_000, 'the retry after the timeout');
      const [d] = await deliveries(id);
      expect(d).toMatchObject({ attempts: 2, response_code: 200 });
      expect(receiver.at('/hang')).toHaveLength(2);
    });
  });

  describe('an endpoint that keeps failing', () => {
    let webhooks: RunningProcess;
    // 5 days in production; 2 s here, with the schedule's first retries 50 ms and 3 s apart.
    beforeAll(async () => {
      webhooks = await startWebhooks(stack, permissive.url, { WEBHOOK_DISABLE_AFTER_SECONDS: '2' });
    });
    afterAll(() => webhooks.stop());

    it('is disabled once every attempt has failed for WEBHOOK_DISABLE_AFTER_SECONDS, and says why', async () => {
      receiver.answer('/always-down', () => ({ status: 503, body: 'down' }));
      const e = await create(permissive, receiver.url('/always-down'));
      await call(`${permissive.url}/api/v2/webhooks/endpoints/${e.body.id}/test`, { method: 'POST', headers: bearer(account.key) });
      const read = async () => (await call(`${permissive.url}/api/v2/webhooks/endpoints/${e.body.id}`, { headers: bearer(account.key) })).body;
      await waitUntil(async () => (await read()).enabled === false, 15_000, 'the endpoint disabled');
      expect((await read()).disabled_reason).toMatch(/^Every delivery attempt failed from \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ on; the last: HTTP 503: down\.$/);
      // The attempt that disabled it ended its delivery: nothing more is tried.
      expect((await deliveries(e.body.id))[0]).toMatchObject({ status: 'failed', attempts: 3, response_code: 503, error: 'HTTP 503: down', next_attempt_at: null });
      await new Promise((r) => setTimeout(r, 500));
      expect(receiver.at('/always-down')).toHaveLength(3);
    });
  });
});
