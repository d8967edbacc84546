import { request } from 'node:http';
import WebSocket from 'ws';
import { mintRouterToken } from '#libs/auth';
import type { RunningProcess } from '../support/processes.js';
import { ReliabilityReport } from '../support/reliability.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';

// Repeated bad credentials from one client address end in 429 for that address (whatever it sends
// next, a valid credential included), on every surface, and only until the window ends. Requests
// leave from their own loopback addresses (127.0.0.x) so each case is its own "client".

const LIMIT = 5;
const WINDOW_SECONDS = 8;
const report = new ReliabilityReport('Brute force', 7);
afterAll(() => report.save());

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  body: any;
}

/** An HTTP request that leaves from a chosen local address. */
function from(localAddress: string, url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers, localAddress }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let body: any = text;
        if ((res.headers['content-type'] ?? '').includes('json') && text) body = JSON.parse(text);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
      });
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** A WebSocket upgrade from a chosen local address: 101 when accepted, else the refusal. */
function upgradeFrom(localAddress: string, url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { localAddress });
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        ws.terminate();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: text ? JSON.parse(text) : null });
      });
    });
    ws.on('open', () => {
      ws.close();
      resolve({ status: 101, headers: {}, text: '', body: null });
    });
    ws.on('error', (err) => {
      if (ws.readyState !== WebSocket.CLOSED) reject(err);
    });
  });
}

/** Polls with the valid credential (which never counts as a failure) until it passes. */
async function untilAccepted(attempt: () => Promise<Answer>, ok: number, timeoutMs: number): Promise<{ answer: Answer; waitedMs: number }> {
  const started = Date.now();
  for (;;) {
    const answer = await attempt();
    if (answer.status === ok || Date.now() - started > timeoutMs) return { answer, waitedMs: Date.now() - started };
    await new Promise((r) => setTimeout(r, 250));
  }
}

function retryAfter(answer: Answer): number {
  return Number(answer.headers['retry-after']);
}

const OPERATOR_TOKEN = 'operator-token-brute-force-0123456789';

describe('brute force: failed authentications are limited per client address', () => {
  const stack = new TestStack('local');
  let api: RunningProcess;
  let account: { id: string; key: string };
  let routerToken: string;
  let wsUrl: string;

  beforeAll(async () => {
    await stack.open();
    api = await stack.startApi({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: String(WINDOW_SECONDS), OPERATOR_TOKEN });
    account = await stack.account({ name: 'valid' });
    await stack.accounts.setLimits(account.id, { routerEnabled: true });
    routerToken = await mintRouterToken(TEST_ROUTER_SECRET, account.id);
    wsUrl = api.url.replace('http', 'ws');
  });
  afterAll(() => stack.close());

  // A well-formed key nobody holds: the guess an attacker makes.
  const wrongKey = () => `cck_guessing_${'x'.repeat(43)}`;

  interface Surface {
    name: string;
    /** One attempt from `source` with this credential. */
    attempt(source: string, credential: string): Promise<Answer>;
    valid(): string;
    wrong(i: number): string;
    ok: number;
    unauthorized(answer: Answer): boolean;
    limited(answer: Answer): boolean;
  }

  const envelope429 = (a: Answer) => a.status === 429 && a.body?.error?.code === 'rate_limited' && typeof a.body?.error?.message === 'string';
  const envelope401 = (a: Answer) => a.status === 401 && a.body?.error?.code === 'unauthorized';

  const surfaces: Surface[] = [
    {
      name: 'v2 Authorization: Bearer',
      attempt: (source, key) => from(source, `${api.url}/api/v2/jobs`, { headers: { authorization: `Bearer ${key}` } }),
      valid: () => account.key,
      wrong: () => wrongKey(),
      ok: 200,
      unauthorized: envelope401,
      limited: envelope429,
    },
    {
      name: 'v1 X-API-Key',
      attempt: (source, key) => from(source, `${api.url}/api/queue`, { headers: { 'x-api-key': key } }),
      valid: () => account.key,
      wrong: () => wrongKey(),
      ok: 200,
      unauthorized: envelope401,
      limited: envelope429,
    },
    {
      name: 'v1 WebSocket ?token=',
      attempt: (source, key) => upgradeFrom(source, `${wsUrl}/ws?clientId=bf&token=${encodeURIComponent(key)}`),
      valid: () => account.key,
      wrong: () => wrongKey(),
      ok: 101,
      unauthorized: envelope401,
      limited: envelope429,
    },
    {
      name: 'router Authorization: Bearer <JWT>',
      attempt: (source, token) => from(source, `${api.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } }),
      valid: () => routerToken,
      wrong: (i) => `${routerToken.slice(0, -4)}${String(1000 + i).slice(-4)}`,
      ok: 200,
      unauthorized: (a) => a.status === 401 && a.body?.error_type === 'unauthorized' && a.headers['x-service-error-type'] === 'unauthorized',
      limited: (a) => a.status === 429 && a.body?.error_type === 'rate_limited' && typeof a.body?.detail === 'string' && a.headers['x-service-error-type'] === 'rate_limited',
    },
    {
      name: 'operator dashboard Authorization: Bearer <OPERATOR_TOKEN>',
      attempt: (source, token) => from(source, `${api.url}/admin/queues/api/queues`, { headers: { authorization: `Bearer ${token}` } }),
      valid: () => OPERATOR_TOKEN,
      wrong: (i) => `operator-guess-${i}-0123456789abcdef`,
      ok: 200,
      unauthorized: envelope401,
      limited: envelope429,
    },
  ];

  const blockedSources: { surface: Surface; source: string }[] = [];

  it.each(surfaces.map((s, i) => [s.name, s, i] as const))('%s: 429 with Retry-After after the limit, a valid credential too; another address unaffected', async (_name, surface, i) => {
    const source = `127.0.0.${10 + i}`;
    const bystander = `127.0.0.${20 + i}`;
    const failures: Answer[] = [];
    for (let n = 0; n < LIMIT; n++) failures.push(await surface.attempt(source, surface.wrong(n)));
    const next = await surface.attempt(source, surface.wrong(LIMIT));
    const validThen = await surface.attempt(source, surface.valid());
    const other = await surface.attempt(bystander, surface.valid());
    const held =
      failures.every(surface.unauthorized) &&
      surface.limited(next) &&
      surface.limited(validThen) &&
      retryAfter(validThen) >= 1 &&
      retryAfter(validThen) <= WINDOW_SECONDS &&
      other.status === surface.ok;
    report.record({
      tried: `${surface.name}: ${LIMIT} wrong credentials from one address, then a wrong and the valid one; the valid one from another address`,
      count: LIMIT + 3,
      outcome: `${failures.map((f) => f.status).join(',')} then ${next.status} and ${validThen.status} (Retry-After ${String(validThen.headers['retry-after'])}); other address ${other.status}`,
      held,
    });
    expect(failures.map((f) => surface.unauthorized(f))).toEqual(failures.map(() => true));
    expect(surface.limited(next)).toBe(true);
    expect({ limited: surface.limited(validThen), text: validThen.text }).toEqual({ limited: true, text: validThen.text });
    expect(retryAfter(validThen)).toBeGreaterThanOrEqual(1);
    expect(retryAfter(validThen)).toBeLessThanOrEqual(WINDOW_SECONDS);
    // The refusal never echoes what was sent.
    expect(validThen.text).not.toContain(surface.valid());
    expect(other.status).toBe(surface.ok);
    blockedSources.push({ surface, source });
  });

  it('counts failures on every surface together, per address', async () => {
    const source = '127.0.0.30';
    const answers: number[] = [];
    // Alternate the surfaces: the address, not the surface, is what is limited.
    for (let n = 0; n < LIMIT; n++) answers.push((await surfaces[n % 2]!.attempt(source, wrongKey())).status);
    const router = await surfaces[3]!.attempt(source, routerToken);
    const ws = await surfaces[2]!.attempt(source, account.key);
    const held = answers.every((s) => s === 401) && surfaces[3]!.limited(router) && envelope429(ws);
    report.record({
      tried: `${LIMIT} wrong keys spread over v2 and v1 from one address, then a valid router token and WebSocket key`,
      count: LIMIT + 2,
      outcome: `${answers.join(',')} then router ${router.status}, WebSocket ${ws.status}`,
      held,
    });
    expect(answers).toEqual(answers.map(() => 401));
    expect(surfaces[3]!.limited(router)).toBe(true);
    expect(envelope429(ws)).toBe(true);
    blockedSources.push({ surface: surfaces[0]!, source });
  });

  it('does not count requests without any credential', async () => {
    const source = '127.0.0.31';
    const statuses: number[] = [];
    for (let n = 0; n < LIMIT * 2; n++) statuses.push((await from(source, `${api.url}/api/v2/jobs`)).status);
    for (let n = 0; n < LIMIT * 2; n++) statuses.push((await upgradeFrom(source, `${wsUrl}/ws?clientId=none`)).status);
    const valid = await surfaces[0]!.attempt(source, account.key);
    report.record({
      tried: 'requests with no credential at all (v2 and WebSocket), then the valid key',
      count: LIMIT * 4 + 1,
      outcome: `${new Set(statuses).size === 1 ? `all ${statuses[0]}` : statuses.join(',')}, then ${valid.status}`,
      held: statuses.every((s) => s === 401) && valid.status === 200,
    });
    expect(statuses).toEqual(statuses.map(() => 401));
    expect(valid.status).toBe(200);
  });

  it('lets every blocked address in again once its window has passed', async () => {
    expect(blockedSources.length).toBe(surfaces.length + 1);
    const results = await Promise.all(
      blockedSources.map(async ({ surface, source }) => {
        const { answer, waitedMs } = await untilAccepted(() => surface.attempt(source, surface.valid()), surface.ok, (WINDOW_SECONDS + 10) * 1000);
        return { surface: surface.name, source, status: answer.status, waitedMs };
      }),
    );
    const held = results.every((r) => r.status === blockedSources.find((b) => b.source === r.source)!.surface.ok);
    report.record({
      tried: `valid credentials from the ${results.length} blocked addresses, polled until accepted (window ${WINDOW_SECONDS} s)`,
      count: results.length,
      outcome: `accepted again after ${Math.round(Math.min(...results.map((r) => r.waitedMs)) / 1000)}-${Math.round(Math.max(...results.map((r) => r.waitedMs)) / 1000)} s of polling`,
      held,
    });
    expect(results.map((r) => r.status)).toEqual(blockedSources.map((b) => b.surface.ok));
  }, (WINDOW_SECONDS + 20) * 1000);

  it('believes X-Forwarded-For only from trusted proxy hops', async () => {
    // Without TRUST_PROXY_HOPS the header is the client's to write, so it must not move the count.
    const spoofs: number[] = [];
    for (let n = 0; n < LIMIT; n++) {
      spoofs.push((await from('127.0.0.40', `${api.url}/api/queue`, { headers: { 'x-api-key': wrongKey(), 'x-forwarded-for': `198.51.100.${n}` } })).status);
    }
    const spoofed = await from('127.0.0.40', `${api.url}/api/queue`, { headers: { 'x-api-key': account.key, 'x-forwarded-for': '198.51.100.200' } });

    // Behind one trusted proxy (the ingress), the address it forwards is the client.
    const proxied = await stack.startApi({ AUTH_FAILURE_LIMIT: String(LIMIT), AUTH_FAILURE_WINDOW_SECONDS: String(WINDOW_SECONDS), TRUST_PROXY_HOPS: '1' });
    const viaProxy = (client: string, key: string) => from('127.0.0.41', `${proxied.url}/api/queue`, { headers: { 'x-api-key': key, 'x-forwarded-for': client } });
    const proxiedFailures: number[] = [];
    for (let n = 0; n < LIMIT; n++) proxiedFailures.push((await viaProxy('203.0.113.7', wrongKey())).status);
    const attacker = await viaProxy('203.0.113.7', account.key);
    const neighbour = await viaProxy('203.0.113.8', account.key);
    await proxied.stop();

    const held = spoofs.every((s) => s === 401) && envelope429(spoofed) && proxiedFailures.every((s) => s === 401) && envelope429(attacker) && neighbour.status === 200;
    report.record({
      tried: `${LIMIT} wrong keys with a different X-Forwarded-For each (no trusted proxy), and ${LIMIT} through one trusted proxy hop`,
      count: LIMIT * 2 + 3,
      outcome: `spoofed header ignored: ${spoofed.status}; behind the proxy the forwarded client ${attacker.status}, its neighbour ${neighbour.status}`,
      held,
    });
    expect(spoofs).toEqual(spoofs.map(() => 401));
    expect(envelope429(spoofed)).toBe(true);
    expect(proxiedFailures).toEqual(proxiedFailures.map(() => 401));
    expect(envelope429(attacker)).toBe(true);
    expect(neighbour.status).toBe(200);
  });
});
