import { randomUUID } from 'node:crypto';
import { mintRouterToken } from '#libs/auth';
import type { RunningProcess } from '../support/processes.js';
import { headerList, rawCall, type RawReply } from '../support/raw-http.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';
import { upgradeStatusOf } from '../v1/v1-world.js';

const APP = 'http://127.0.0.2:5173';
const OTHER_APP = 'https://console.example.test';
const STRANGER = 'http://127.0.0.3:8000';
const SENT = ['authorization', 'x-api-key', 'content-type', 'idempotency-key', 'prefer', 'last-event-id', 'if-none-match', 'range'];
const READ = ['location', 'retry-after', 'x-request-id', 'etag', 'idempotent-replayed', 'preference-applied', 'content-disposition', 'x-service-request-id', 'x-service-error-type', 'x-committed-spend-limit', 'x-committed-spend-current', 'x-committed-spend-remaining'];
const NO_JOB = '00000000-0000-4000-8000-000000000000';

/** Every surface, each by a route that exists there, as a prefix (BASE_PATH, a deployment) leaves it. */
const SURFACES = { v2: '/api/v2/jobs', v1: '/api/prompt', router: '/v1/models', openapi: '/openapi.json' };

const preflight = (url: string, origin: string, method = 'POST', headers = 'authorization,content-type,idempotency-key') =>
  rawCall(url, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers } });

const json = (reply: RawReply) => JSON.parse(reply.bytes.toString('utf8')) as Record<string, any>;

/** What a browser needs to let a page from `origin` read this answer, and every header it reads. */
function expectReadableBy(reply: RawReply, origin: string, allowed: '*' | 'listed' = 'listed'): void {
  expect(reply.headers['access-control-allow-origin']).toBe(allowed === '*' ? '*' : origin);
  if (allowed === 'listed') expect(headerList(reply.headers, 'vary')).toContain('origin');
  expect(headerList(reply.headers, 'access-control-expose-headers')).toEqual(expect.arrayContaining(READ));
  expect(reply.headers['access-control-allow-credentials']).toBeUndefined();
}

function expectPreflightAllowed(reply: RawReply, origin: string, allowed: '*' | 'listed' = 'listed'): void {
  expect(reply.status).toBe(204);
  expect(reply.bytes.length).toBe(0);
  expect(reply.headers['access-control-allow-origin']).toBe(allowed === '*' ? '*' : origin);
  expect(headerList(reply.headers, 'access-control-allow-methods')).toEqual(expect.arrayContaining(['get', 'head', 'post', 'put', 'patch', 'delete']));
  expect(headerList(reply.headers, 'access-control-allow-headers')).toEqual(expect.arrayContaining(SENT));
  expect(Number(reply.headers['access-control-max-age'])).toBeGreaterThanOrEqual(600);
}

describe('CORS on every surface', () => {
  const stack = new TestStack('local');
  let listed: RunningProcess;
  let star: RunningProcess;
  let none: RunningProcess;
  let prefixed: RunningProcess;
  let alice: { id: string; key: string };
  let routerToken: string;

  beforeAll(async () => {
    await stack.open();
    [listed, star, none, prefixed] = await Promise.all([
      stack.startApi({ CORS_ALLOWED_ORIGINS: `${APP}, ${OTHER_APP}` }),
      stack.startApi({ CORS_ALLOWED_ORIGINS: '*' }),
      stack.startApi(),
      stack.startApi({ CORS_ALLOWED_ORIGINS: APP, SURFACE: 'deployment', BASE_PATH: '/comfy' }),
    ]);
    alice = await stack.account({ name: 'alice' });
    await stack.accounts.setLimits(alice.id, { routerEnabled: true });
    routerToken = await mintRouterToken(TEST_ROUTER_SECRET, alice.id);
  });
  afterAll(() => stack.close());

  it('answers a preflight from a listed origin with 204, the methods, the headers clients send and a max-age, on every surface', async () => {
    for (const [surface, path] of Object.entries(SURFACES)) {
      for (const origin of [APP, OTHER_APP]) {
        const reply = await preflight(`${listed.url}${path}`, origin, 'POST', SENT.join(','));
        expect([surface, reply.status]).toEqual([surface, 204]);
        expectPreflightAllowed(reply, origin);
        expect(headerList(reply.headers, 'vary')).toContain('origin');
      }
    }
    // A route below the surface, and the methods a page uses there.
    expectPreflightAllowed(await preflight(`${listed.url}/api/v2/jobs/${NO_JOB}/events`, APP, 'GET', 'authorization,last-event-id'), APP);
    expectPreflightAllowed(await preflight(`${listed.url}/api/v2/assets/${NO_JOB}`, APP, 'DELETE', 'authorization'), APP);
    expectPreflightAllowed(await preflight(`${listed.url}/api/v2/assets/${NO_JOB}/content`, APP, 'GET', 'authorization,range,if-none-match'), APP);
  });

  it('needs no credential for a preflight, and counts none against the rate limit', async () => {
    const bob = await stack.account({ name: 'bob' });
    await stack.accounts.setLimits(bob.id, { requestsPerMinute: 3 });
    // A fixed one-minute window: begin well inside one, so all of this counts in the same.
    if (new Date().getSeconds() > 50) await new Promise((r) => setTimeout(r, (61 - new Date().getSeconds()) * 1000));
    for (let i = 0; i < 12; i++) expect((await preflight(`${listed.url}/api/v2/jobs`, APP, 'GET', 'authorization')).status).toBe(204);
    const list = () => rawCall(`${listed.url}/api/v2/jobs`, { headers: { origin: APP, authorization: `Bearer ${bob.key}` } });
    for (let i = 0; i < 3; i++) {
      const ok = await list();
      expect(ok.status).toBe(200);
      expectReadableBy(ok, APP);
    }
    const limited = await list();
    expect(limited.status).toBe(429);
    expect(json(limited).error.code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expectReadableBy(limited, APP);
  });

  it("puts the headers on answers that succeed and on 401, 404 and 429 in each surface's shape", async () => {
    const asAlice = { origin: APP, authorization: `Bearer ${alice.key}` };
    const ok = await rawCall(`${listed.url}/api/v2/jobs`, { headers: asAlice });
    expect(ok.status).toBe(200);
    expectReadableBy(ok, APP);

    const unauthorized = {
      v2: await rawCall(`${listed.url}/api/v2/jobs`, { headers: { origin: APP } }),
      v1: await rawCall(`${listed.url}/api/queue`, { headers: { origin: APP, 'x-api-key': 'not-a-key' } }),
      router: await rawCall(`${listed.url}/v1/models`, { headers: { origin: APP } }),
    };
    expect(json(unauthorized.v2).error.code).toBe('unauthorized');
    expect(json(unauthorized.v1).error.code).toBe('unauthorized');
    expect(json(unauthorized.router)).toMatchObject({ error_type: 'unauthorized', detail: expect.any(String) });
    for (const reply of Object.values(unauthorized)) {
      expect(reply.status).toBe(401);
      expectReadableBy(reply, APP);
    }

    const notFound = {
      v2: await rawCall(`${listed.url}/api/v2/jobs/${NO_JOB}`, { headers: asAlice }),
      v1: await rawCall(`${listed.url}/api/view?filename=nothing-here.png`, { headers: { origin: APP, 'x-api-key': alice.key } }),
      router: await rawCall(`${listed.url}/v1/models/nobody/nothing`, { headers: { origin: APP, authorization: `Bearer ${routerToken}` } }),
      unrouted: await rawCall(`${listed.url}/no/such/route`, { headers: { origin: APP } }),
    };
    expect(json(notFound.v2).error.code).toBe('not_found');
    expect(json(notFound.router)).toMatchObject({ error_type: 'model_not_found' });
    for (const reply of Object.values(notFound)) {
      expect(reply.status).toBe(404);
      expectReadableBy(reply, APP);
    }

    // Past the brute-force guard's count, every surface answers 429 to that address.
    const source = '127.0.0.61';
    for (let i = 0; i < 51; i++) await rawCall(`${listed.url}/api/v2/jobs`, { headers: { authorization: 'Bearer not-a-key' }, localAddress: source });
    const limited = {
      v2: await rawCall(`${listed.url}/api/v2/jobs`, { headers: asAlice, localAddress: source }),
      v1: await rawCall(`${listed.url}/api/queue`, { headers: { origin: APP, 'x-api-key': alice.key }, localAddress: source }),
      router: await rawCall(`${listed.url}/v1/models`, { headers: { origin: APP, authorization: `Bearer ${routerToken}` }, localAddress: source }),
    };
    expect(json(limited.v2).error.code).toBe('rate_limited');
    expect(json(limited.router)).toMatchObject({ error_type: 'rate_limited' });
    for (const reply of Object.values(limited)) {
      expect(reply.status).toBe(429);
      expect(Number(reply.headers['retry-after'])).toBeGreaterThan(0);
      expectReadableBy(reply, APP);
    }
  });

  it('gives an origin that is not listed nothing a browser would let it read', async () => {
    for (const path of Object.values(SURFACES)) {
      const reply = await preflight(`${listed.url}${path}`, STRANGER);
      expect(reply.headers['access-control-allow-origin']).toBeUndefined();
      // The answer depends on the origin, so a cache must keep it apart from a listed one's.
      expect(headerList(reply.headers, 'vary')).toContain('origin');
    }
    const answer = await rawCall(`${listed.url}/api/v2/jobs`, { headers: { origin: STRANGER, authorization: `Bearer ${alice.key}` } });
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    // Near misses of a listed origin are other origins.
    for (const near of ['http://127.0.0.2:5174', 'https://127.0.0.2:5173', 'http://127.0.0.2:5173.evil.test', 'null']) {
      expect((await preflight(`${listed.url}/api/v2/jobs`, near)).headers['access-control-allow-origin']).toBeUndefined();
    }
  });

  it('lets an OPTIONS request that is no preflight reach the routes', async () => {
    // The router answers OPTIONS itself (405); anything else has no OPTIONS route (404).
    const router = await rawCall(`${listed.url}/v1/models`, { method: 'OPTIONS', headers: { authorization: `Bearer ${routerToken}` } });
    expect(router.status).toBe(405);
    expect(json(router)).toMatchObject({ error_type: expect.any(String) });
    const v2 = await rawCall(`${listed.url}/api/v2/jobs`, { method: 'OPTIONS' });
    expect(v2.status).toBe(404);
    expect(json(v2).error.code).toBe('not_found');
  });

  it('with `*`, allows any origin, with the same methods, headers and max-age', async () => {
    for (const path of Object.values(SURFACES)) {
      for (const origin of [APP, STRANGER]) expectPreflightAllowed(await preflight(`${star.url}${path}`, origin), origin, '*');
    }
    const unauthorized = await rawCall(`${star.url}/api/v2/jobs`, { headers: { origin: STRANGER } });
    expect(unauthorized.status).toBe(401);
    expectReadableBy(unauthorized, STRANGER, '*');
  });

  it('without configuration, sends no CORS header at all', async () => {
    for (const path of Object.values(SURFACES)) {
      const reply = await preflight(`${none.url}${path}`, APP);
      expect(reply.status).not.toBe(204);
      expect(Object.keys(reply.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    }
    const answer = await rawCall(`${none.url}/api/v2/jobs`, { headers: { origin: APP, authorization: `Bearer ${alice.key}` } });
    expect(answer.status).toBe(200);
    expect(Object.keys(answer.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
  });

  it('serves the same under BASE_PATH and under a deployment prefix', async () => {
    for (const prefix of ['/comfy', '/comfy/deployment/my-app']) {
      for (const [surface, path] of Object.entries(SURFACES)) {
        const reply = await preflight(`${prefixed.url}${prefix}${path}`, APP);
        expect([surface, reply.status]).toEqual([surface, 204]);
        expectPreflightAllowed(reply, APP);
      }
      expect((await preflight(`${prefixed.url}${prefix}/api/v2/jobs`, STRANGER)).headers['access-control-allow-origin']).toBeUndefined();
    }
    const document = await rawCall(`${prefixed.url}/comfy/deployment/my-app/openapi.json`, { headers: { origin: APP } });
    expect(document.status).toBe(200);
    expectReadableBy(document, APP);
    const unauthorized = await rawCall(`${prefixed.url}/comfy/deployment/my-app/api/v2/jobs`, { headers: { origin: APP } });
    expect(unauthorized.status).toBe(401);
    expectReadableBy(unauthorized, APP);
    const unknown = await rawCall(`${prefixed.url}/comfy/deployment/no-such-app/api/v2/jobs/${NO_JOB}`, { headers: { origin: APP, authorization: `Bearer ${alice.key}` } });
    expect(unknown.status).toBe(404);
    expectReadableBy(unknown, APP);
  });

  describe('the v1 WebSocket', () => {
    const ws = (api: RunningProcess, query: string) => `${api.url.replace('http', 'ws')}/ws?clientId=${randomUUID()}${query}`;

    it('refuses an upgrade from an origin that is not listed, before looking at the key', async () => {
      expect(await upgradeStatusOf(ws(listed, `&token=${alice.key}`), { headers: { origin: STRANGER } })).toBe(403);
      // No key either: still 403, not 401: the key is never looked at.
      expect(await upgradeStatusOf(ws(listed, ''), { headers: { origin: STRANGER } })).toBe(403);
      expect(await upgradeStatusOf(`${listed.url.replace('http', 'ws')}/api/ws?token=${alice.key}`, { headers: { origin: 'http://127.0.0.2:5174' } })).toBe(403);
    });

    it('lets a listed origin, the API’s own origin and clients that send none upgrade', async () => {
      expect(await upgradeStatusOf(ws(listed, `&token=${alice.key}`), { headers: { origin: APP } })).toBe(101);
      expect(await upgradeStatusOf(ws(listed, `&token=${alice.key}`), { headers: { origin: OTHER_APP } })).toBe(101);
      // Python's websocket-client sends the server's own origin.
      expect(await upgradeStatusOf(ws(listed, `&token=${alice.key}`), { headers: { origin: listed.url } })).toBe(101);
      expect(await upgradeStatusOf(ws(listed, `&token=${alice.key}`))).toBe(101);
      // The origin check comes first, the key is still needed.
      expect(await upgradeStatusOf(ws(listed, ''), { headers: { origin: APP } })).toBe(401);
    });

    it('checks no origin when any origin or none is configured', async () => {
      expect(await upgradeStatusOf(ws(star, `&token=${alice.key}`), { headers: { origin: STRANGER } })).toBe(101);
      expect(await upgradeStatusOf(ws(none, `&token=${alice.key}`), { headers: { origin: STRANGER } })).toBe(101);
    });
  });
});
