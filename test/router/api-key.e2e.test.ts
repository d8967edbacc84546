import { jest } from '@jest/globals';
import { mintRouterToken } from '#libs/auth';
import { TEST_ROUTER_SECRET } from '../support/stack.js';
import { RouterWorld, eventually, expectRequestId, expectRouterError } from './router-world.js';

// The router also takes the account's API key as its bearer credential (a page signed in with a
// key, the console, has no JWT). The key is told apart from a JWT by its shape and names the same
// workspace, with the same checks: enabled, active, entitled, limits, credits.

jest.setTimeout(60_000);

describe('router calls with an account API key in place of a JWT', () => {
  const world = new RouterWorld();
  let key: string;
  let token: string;
  let accountId: string;

  beforeAll(async () => {
    await world.open();
    const { id, key: k } = await world.stack.account({ name: 'keyed' });
    await world.stack.accounts.setLimits(id, { routerEnabled: true, routerEntitlements: ['recraft/*'], routerMaxConcurrent: 8, routerSpendCapCents: 10_000, routerWindowCalls: 1000, routerWindowSeconds: 60 });
    accountId = id;
    key = k;
    token = await mintRouterToken(TEST_ROUTER_SECRET, id);
  });
  afterAll(() => world.close());

  it('reads the catalog, a model and its schema exactly as the JWT of the same account does', async () => {
    for (const path of ['/v1/models?limit=100', '/v1/models/recraft/recraftv3', '/v1/models/recraft/recraftv3/openapi.json', '/v1/models/luma/ray-2']) {
      const [byKey, byJwt] = await Promise.all([world.get(key, path), world.get(token, path)]);
      expect({ path, status: byKey.status, type: byKey.headers.get('x-service-error-type'), body: byKey.text }).toEqual({
        path,
        status: byJwt.status,
        type: byJwt.headers.get('x-service-error-type'),
        body: byJwt.text,
      });
    }
    const list = await world.get(key, '/v1/models?limit=100');
    expect(list.body.data.map((m: { id: string }) => m.id).every((id: string) => id.startsWith('recraft/'))).toBe(true);
  });

  it('runs a call, charged and recorded for the key\'s account', async () => {
    const reply = await world.post(key, 'recraft/recraftv3', { prompt: 'a lighthouse' });
    expect(reply.status).toBe(200);
    const callId = expectRequestId(reply);
    // Usage records reach the database in batches after the answer.
    const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { id: callId, accountId, state: 'completed' } }));
    expect(row).toMatchObject({ accountId, modelId: 'recraft/recraftv3', charged: true });
  });

  it('applies the account\'s entitlements, router switch and status to the key as to the JWT', async () => {
    const outside = await world.post(key, 'luma/ray-2', { prompt: 'x', model: 'ray-2' });
    const outsideByJwt = await world.post(token, 'luma/ray-2', { prompt: 'x', model: 'ray-2' });
    expect([outside.status, outside.headers.get('x-service-error-type')]).toEqual([outsideByJwt.status, outsideByJwt.headers.get('x-service-error-type')]);
    expect(outside.status).toBeGreaterThanOrEqual(400);

    const { id, key: offKey } = await world.stack.account({ name: 'router-off' });
    expectRouterError(await world.get(offKey, '/v1/models'), 403, 'not_enabled');
    await world.stack.accounts.setLimits(id, { routerEnabled: true, status: 'inactive' });
    // The router's account cache holds for about two seconds.
    const reply = await eventually(async () => {
      const r = await world.get(offKey, '/v1/models');
      return r.headers.get('x-service-error-type') === 'forbidden' && r;
    });
    expectRouterError(reply, 403, 'forbidden');
  });

  it('refuses a key that is unknown or revoked, in the router\'s shape', async () => {
    const unknown = `cck_AAAAAAAA_${'A'.repeat(43)}`;
    expectRouterError(await world.get(unknown, '/v1/models'), 401, 'unauthorized');
    const { id } = await world.stack.account({ name: 'revoked' });
    await world.stack.accounts.setLimits(id, { routerEnabled: true });
    const extra = await world.stack.accounts.createApiKey(id);
    expect((await world.get(extra.key, '/v1/models')).status).toBe(200);
    expect((await world.stack.admin(['key', 'revoke', '--key', extra.id])).code).toBe(0);
    const reply = await eventually(async () => {
      const r = await world.get(extra.key, '/v1/models');
      return r.status === 401 && r;
    });
    expectRouterError(reply, 401, 'unauthorized');
    expect(reply.text).not.toContain(extra.key);
  });
});
