import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { jest } from '@jest/globals';
import { SignJWT } from 'jose';
import { mintRouterToken } from '#libs/auth';
import { call } from '../support/http.js';
import { TEST_ROUTER_SECRET } from '../support/stack.js';
import { CATALOG_DIR, RouterWorld, expectRequestId, expectRouterError, shippedModels, tinySchemaDocument, type Workspace } from './router-world.js';

jest.setTimeout(60_000);

const CURSOR = /^[A-Za-z0-9._~+/=-]{1,512}$/;
const SEGMENT = /^[a-z0-9]+([._-][a-z0-9]+)*$/;

describe('router catalog', () => {
  const world = new RouterWorld();
  let all: Workspace;

  beforeAll(async () => {
    await world.open();
    all = await world.workspace();
  });
  afterAll(() => world.close());

  async function walk(token: string, limit: number, between: (page: number) => Promise<void> = async () => undefined): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 1000; page++) {
      const q = new URLSearchParams({ limit: String(limit), ...(cursor ? { cursor } : {}) });
      const reply = await world.get(token, `/v1/models?${q}`);
      expect(reply.status).toBe(200);
      expect(reply.body.limit).toBe(limit);
      expect(reply.body.data.length).toBeLessThanOrEqual(limit);
      ids.push(...reply.body.data.map((m: { id: string }) => m.id));
      if (!reply.body.has_more) {
        expect(reply.body.next_cursor).toBeUndefined();
        return ids;
      }
      expect(reply.body.next_cursor).toMatch(CURSOR);
      cursor = reply.body.next_cursor;
      await between(page);
    }
    throw new Error('walk did not end');
  }

  it('loads every model of the shipped catalog, listed with exactly the contract fields', async () => {
    const shipped = shippedModels();
    expect(shipped.length).toBeGreaterThanOrEqual(6);
    expect(new Set(shipped.map((m) => m.adapter)).size).toBeGreaterThanOrEqual(3);
    const ids = await walk(all.token, 2);
    expect([...ids].sort()).toEqual(shipped.map((m) => m.id).sort());
    const reply = await world.get(all.token, '/v1/models?limit=100');
    expectRequestId(reply);
    for (const entry of reply.body.data) {
      expect(Object.keys(entry).sort()).toEqual(['billing', 'id', 'model', 'provider']);
      expect(entry.id).toBe(`${entry.provider}/${entry.model}`);
      expect(entry.provider).toMatch(SEGMENT);
      expect(entry.model).toMatch(SEGMENT);
      const declared = shipped.find((m) => m.id === entry.id)!;
      expect(entry.billing).toEqual({ charges_on_policy_rejection: declared.charges_on_policy_rejection });
    }
    const stored = await world.stack.db.routerModel.findUnique({ where: { id: 'luma/ray-2' } });
    expect(stored).toMatchObject({ adapterKind: 'luma', priceCents: 200, chargesOnPolicyRejection: 'no' });
    expect(stored!.upstreamUrl).toBe(`${world.sim.url}/luma/dream-machine/v1/generations`);
    expect(stored!.inputSchemaText).toBe(readFileSync(path.join(CATALOG_DIR, 'schemas/luma-ray-2.json'), 'utf8'));
  });

  it('applies the page size rules: default 20, clamped to 100, zero or negative is the default', async () => {
    const cases: [string, number][] = [['', 20], ['?limit=1000', 100], ['?limit=100', 100], ['?limit=0', 20], ['?limit=-5', 20], ['?limit=3', 3], ['?limit=1', 1]];
    for (const [query, expected] of cases) {
      const reply = await world.get(all.token, `/v1/models${query}`);
      expect(`${query} -> ${reply.status} ${reply.body.limit}`).toBe(`${query} -> 200 ${expected}`);
      expect(reply.body.data.length).toBe(Math.min(expected, shippedModels().length));
      expect(reply.body.has_more).toBe(expected < shippedModels().length);
    }
    expectRouterError(await world.get(all.token, '/v1/models?limit=abc'), 400, 'invalid_input');
    expectRouterError(await world.get(all.token, '/v1/models?limit=2.5'), 400, 'invalid_input');
  });

  it('refuses malformed, tampered, foreign and oversized cursors with 400 invalid_input', async () => {
    const first = await world.get(all.token, '/v1/models?limit=2');
    const cursor: string = first.body.next_cursor;
    const other = await world.workspace();
    const flipped = cursor.slice(0, 10) + (cursor[10] === 'A' ? 'B' : 'A') + cursor.slice(11);
    const bad = [flipped, 'garbage', 'a'.repeat(513), `${cursor}x`, '%%%', cursor.split('.').slice(0, 2).join('.')];
    for (const c of bad) expectRouterError(await world.get(all.token, `/v1/models?cursor=${encodeURIComponent(c)}`), 400, 'invalid_input');
    // A cursor is only good for the workspace it was issued to.
    expectRouterError(await world.get(other.token, `/v1/models?cursor=${encodeURIComponent(cursor)}`), 400, 'invalid_input');
    const ok = await world.get(all.token, `/v1/models?limit=2&cursor=${encodeURIComponent(cursor)}`);
    expect(ok.status).toBe(200);
    expect(ok.body.data[0].id > first.body.data[1].id).toBe(true);
  });

  it('keeps a walk correct while models are added and removed under it', async () => {
    const doc = (id: string) => ({
      id,
      provider: id.split('/')[0]!,
      model: id.split('/')[1]!,
      adapterKind: 'sync-json',
      upstreamUrl: 'http://127.0.0.1:9/x',
      inputSchema: JSON.parse(tinySchemaDocument(id)),
      inputSchemaText: tinySchemaDocument(id),
      priceCents: 1,
      chargesOnPolicyRejection: 'no',
    });
    const stable = Array.from({ length: 120 }, (_, i) => `walk/m-${String(i * 10).padStart(5, '0')}`);
    const volatile = Array.from({ length: 120 }, (_, i) => `walk/m-${String(i * 10 + 5).padStart(5, '0')}`);
    await world.stack.db.routerModel.createMany({ data: [...stable, ...volatile].map(doc) });
    let added = 0;
    let removed = 0;
    const seenVolatile = new Set<string>();
    const ids = await walk(all.token, 7, async (page) => {
      // Between pages: delete some volatile models (behind and ahead of the walk) and add new
      // ones between stable neighbours, on both sides of the cursor.
      const victims = volatile.filter((_, i) => i % 9 === page % 9 && !seenVolatile.has(volatile[i]!));
      if (victims.length) removed += (await world.stack.db.routerModel.deleteMany({ where: { id: { in: victims } } })).count;
      for (const v of victims) seenVolatile.add(v);
      const fresh = [`walk/m-${String(page * 37 % 1200).padStart(5, '0')}-n${page}`, `walk/a-${page}`, `walk/z-${page}`];
      await world.stack.db.routerModel.createMany({ data: fresh.map(doc), skipDuplicates: true });
      added += fresh.length;
    });
    expect(added).toBeGreaterThan(0);
    expect(removed).toBeGreaterThan(0);
    // Nothing repeated, and every model that existed for the whole walk was seen exactly once.
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of [...stable, ...shippedModels().map((m) => m.id)]) expect(ids).toContain(id);
    await world.stack.db.routerModel.deleteMany({ where: { provider: 'walk' } });
  });

  it('reads one model; unknown and malformed ids answer 404 model_not_found with suggestions', async () => {
    const reply = await world.get(all.token, '/v1/models/bfl/flux-pro-1.1');
    expect(reply.status).toBe(200);
    expectRequestId(reply);
    expect(reply.body).toEqual({ id: 'bfl/flux-pro-1.1', provider: 'bfl', model: 'flux-pro-1.1', billing: { charges_on_policy_rejection: 'unknown' } });

    const typo = await world.get(all.token, '/v1/models/bfl/flux-pro-11');
    expectRouterError(typo, 404, 'model_not_found');
    expect(typo.body.detail).toContain('bfl/flux-pro-1.1');
    const suggested = typo.body.detail.match(/[a-z0-9._-]+\/[a-z0-9._-]+/g).filter((s: string) => s !== 'bfl/flux-pro-11');
    expect(suggested.length).toBeGreaterThan(0);
    expect(suggested.length).toBeLessThanOrEqual(3);

    for (const p of ['/v1/models/BFL/flux-pro-1.1', '/v1/models/bfl/FLUX', `/v1/models/${'a'.repeat(65)}/x`, `/v1/models/bfl/${'m'.repeat(129)}`, '/v1/models/bfl/flux..pro', '/v1/models/unknown/model', '/v1/models/bfl/flux-pro-1.1/extra/segment']) {
      expectRouterError(await world.get(all.token, p), 404, 'model_not_found');
    }
    const upper = await world.get(all.token, '/v1/models/BFL/flux-pro-1.1');
    expect(upper.body.detail).toContain('bfl/flux-pro-1.1');
    // Segments at the contract's maximum lengths are valid ids; they just name nothing.
    const longest = await world.get(all.token, `/v1/models/${'p'.repeat(64)}/${'m'.repeat(128)}`);
    expectRouterError(longest, 404, 'model_not_found');
  });

  it('answers a malformed percent-encoding in a router path in the router shape, with its request id', async () => {
    // Fastify refuses these before any route or hook runs (its frameworkErrors).
    for (const p of ['/v1/models/bfl/%zz', '/v1/models/%E0%A4%A/flux-pro-1.1', '/v1/models/bfl/flux-pro-1.1%/openapi.json']) {
      expectRouterError(await world.get(all.token, p), 400, 'invalid_input');
    }
    const call = await world.post(all.token, 'bfl/%zz', { prompt: 'x' });
    expectRouterError(call, 400, 'invalid_input');
  });

  it('points at the schema document with an https input_schema_url when served over https', async () => {
    const api = await world.startApi({ PUBLIC_URL: 'https://router.example.test' });
    const reply = await world.get(all.token, '/v1/models/luma/ray-2', {}, api);
    expect(reply.body.input_schema_url).toBe('https://router.example.test/v1/models/luma/ray-2/openapi.json');
    // Behind plain http the contract's https-only pointer is left out.
    expect((await world.get(all.token, '/v1/models/luma/ray-2')).body.input_schema_url).toBeUndefined();
    await api.stop();
  });

  it('serves each schema document with a strong ETag, private revalidation and 304 on a match', async () => {
    const url = '/v1/models/bfl/flux-pro-1.1/openapi.json';
    const first = await world.get(all.token, url);
    expect(first.status).toBe(200);
    expectRequestId(first);
    expect(first.text).toBe(readFileSync(path.join(CATALOG_DIR, 'schemas/bfl-flux-pro-1.1.json'), 'utf8'));
    expect(first.body.openapi).toMatch(/^3\.1/);
    expect(first.body.paths['/v1/models/bfl/flux-pro-1.1'].post.requestBody.content['application/json'].schema).toBeDefined();
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect(first.headers.get('cache-control')).toBe('private, must-revalidate');

    for (const inm of [etag, `W/${etag}`, '*', `"nope", ${etag}`, `W/"x",W/${etag}`]) {
      const again = await world.get(all.token, url, { 'if-none-match': inm });
      expect(`${inm}: ${again.status}`).toBe(`${inm}: 304`);
      expect(again.text).toBe('');
      expect(again.headers.get('etag')).toBe(etag);
      expect(again.headers.get('cache-control')).toBe('private, must-revalidate');
      expectRequestId(again);
    }
    for (const inm of ['"nope"', 'W/"nope"', etag.slice(0, -2) + '"']) {
      const miss = await world.get(all.token, url, { 'if-none-match': inm });
      expect(`${inm}: ${miss.status}`).toBe(`${inm}: 200`);
      expect(miss.text).toBe(first.text);
    }
    const other = await world.get(all.token, '/v1/models/luma/ray-2/openapi.json');
    expect(other.headers.get('etag')).not.toBe(etag);
    expectRouterError(await world.get(all.token, '/v1/models/bfl/nothing/openapi.json'), 404, 'model_not_found');
    expectRouterError(await world.get(null, url), 401, 'unauthorized');
  });

  it('answers a method no route serves with 405 and Allow, after the token is checked', async () => {
    const paths = ['/v1/models', '/v1/models/bfl/flux-pro-1.1', '/v1/models/bfl/flux-pro-1.1/openapi.json', '/v1/models/bfl/nothing'];
    for (const method of ['PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
      for (const route of paths) {
        const anonymous = await call(`${world.api.url}${route}`, { method });
        expect(`${method} ${route}: ${anonymous.status}`).toBe(`${method} ${route}: 401`);
        expectRouterError(anonymous, 401, 'unauthorized');
        const refused = await call(`${world.api.url}${route}`, { method, headers: { authorization: `Bearer ${all.token}` } });
        expect(`${method} ${route}: ${refused.status}`).toBe(`${method} ${route}: 405`);
        expectRouterError(refused, 405, 'invalid_input');
        expect(refused.headers.get('allow')).toBe(route === '/v1/models' ? 'GET, HEAD' : 'GET, HEAD, POST');
        expect(refused.body.detail).toContain(method);
      }
    }
    const post = await call(`${world.api.url}/v1/models`, { method: 'POST', headers: { authorization: `Bearer ${all.token}`, 'content-type': 'application/json' }, body: '{}' });
    expectRouterError(post, 405, 'invalid_input');
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    expectRouterError(await call(`${world.api.url}/v1/models`, { method: 'POST' }), 401, 'unauthorized');
  });

  it('shows a workspace only the models it is entitled to', async () => {
    const narrow = await world.workspace({ routerEntitlements: ['bfl/*', 'elevenlabs/eleven_v3'] });
    const listed = (await world.get(narrow.token, '/v1/models?limit=100')).body.data.map((m: { id: string }) => m.id);
    expect(listed.sort()).toEqual(['bfl/flux-pro-1.1', 'bfl/flux-pro-1.1-ultra', 'elevenlabs/eleven_v3']);
    expectRouterError(await world.get(narrow.token, '/v1/models/openai/gpt-image-1'), 403, 'forbidden');
    expectRouterError(await world.get(narrow.token, '/v1/models/openai/gpt-image-1/openapi.json'), 403, 'forbidden');
    expectRouterError(await world.post(narrow.token, 'openai/gpt-image-1', { model: 'gpt-image-1', prompt: 'x' }), 403, 'forbidden');
    const typo = await world.get(narrow.token, '/v1/models/openai/gpt-image-2');
    expectRouterError(typo, 404, 'model_not_found');
    for (const hidden of ['openai/gpt-image-1', 'recraft/recraftv3', 'luma/ray-2', 'kling/kling-v2-5-turbo']) expect(typo.body.detail).not.toContain(hidden);
    expect(typo.body.detail).toMatch(/elevenlabs\/eleven_v3|bfl\//);
  });

  it('authenticates with HS256 and RS256 tokens; refuses missing, forged, expired, exp-less and too long-lived ones; not_enabled', async () => {
    for (const headers of [{}, { authorization: 'Bearer' }, { authorization: 'Basic abc' }, { authorization: 'Bearer not-a-jwt' }] as Record<string, string>[]) {
      expectRouterError(await world.get(null, '/v1/models', headers), 401, 'unauthorized');
    }
    const forged = await mintRouterToken('some-other-secret-0123456789', all.id);
    expectRouterError(await world.get(forged, '/v1/models'), 401, 'unauthorized');
    const expired = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(all.id).setIssuedAt(1_700_000_000).setExpirationTime(1_700_000_100).sign(new TextEncoder().encode(TEST_ROUTER_SECRET));
    expectRouterError(await world.get(expired, '/v1/models'), 401, 'unauthorized');
    // A token without exp would work for ever; one living past the maximum lifetime (30 days by default) is refused too.
    const forever = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(all.id).setIssuedAt().sign(new TextEncoder().encode(TEST_ROUTER_SECRET));
    expectRouterError(await world.get(forever, '/v1/models'), 401, 'unauthorized');
    const tooLong = await mintRouterToken(TEST_ROUTER_SECRET, all.id, 31 * 24 * 3600);
    expectRouterError(await world.get(tooLong, '/v1/models'), 401, 'unauthorized');
    const shorter = await world.startApi({ ROUTER_TOKEN_MAX_LIFETIME_SECONDS: '3600' });
    expectRouterError(await world.get(all.token, '/v1/models', {}, shorter), 401, 'unauthorized');
    expect((await world.get(await mintRouterToken(TEST_ROUTER_SECRET, all.id, 3600), '/v1/models', {}, shorter)).status).toBe(200);
    await shorter.stop();
    const nobody = await mintRouterToken(TEST_ROUTER_SECRET, '00000000-0000-4000-8000-000000000000');
    expectRouterError(await world.get(nobody, '/v1/models'), 401, 'unauthorized');

    const off = await world.workspace({ routerEnabled: false });
    expectRouterError(await world.get(off.token, '/v1/models'), 403, 'not_enabled');
    expectRouterError(await world.post(off.token, 'bfl/flux-pro-1.1', { prompt: 'x' }), 403, 'not_enabled');

    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const api = await world.startApi({ ROUTER_JWT_PUBLIC_KEYS: pem });
    const rs = await new SignJWT({}).setProtectedHeader({ alg: 'RS256' }).setSubject(all.id).setIssuedAt().setExpirationTime('1h').sign(privateKey);
    expect((await world.get(rs, '/v1/models', {}, api)).status).toBe(200);
    expectRouterError(await world.get(rs, '/v1/models'), 401, 'unauthorized'); // that replica has no public key
    await api.stop();
  });
});

describe('router catalog file', () => {
  const world = new RouterWorld();
  afterAll(() => world.close());

  it('is loaded at start: models removed from the file are deleted, changed ones updated', async () => {
    await world.open();
    const ws = await world.workspace();
    expect((await world.get(ws.token, '/v1/models?limit=100')).body.data).toHaveLength(shippedModels().length);
    await world.stopApi();
    const { writeCatalog } = await import('./router-world.js');
    world.catalogFile = writeCatalog(world.stack.blobDir, (models) =>
      models.filter((m) => m.id !== 'recraft/recraftv3').map((m) => (m.id === 'luma/ray-2' ? { ...m, price_cents: 9, charges_on_policy_rejection: 'yes' } : m)),
    );
    world.api = await world.startApi();
    const ids = (await world.get(ws.token, '/v1/models?limit=100')).body.data.map((m: { id: string }) => m.id);
    expect(ids).not.toContain('recraft/recraftv3');
    expect(ids).toHaveLength(shippedModels().length - 1);
    expect(await world.stack.db.routerModel.findUnique({ where: { id: 'recraft/recraftv3' } })).toBeNull();
    expect(await world.stack.db.routerModel.findUnique({ where: { id: 'luma/ray-2' } })).toMatchObject({ priceCents: 9, chargesOnPolicyRejection: 'yes' });
    expectRouterError(await world.get(ws.token, '/v1/models/recraft/recraftv3'), 404, 'model_not_found');
  });

  it('refuses to start on an invalid catalog, naming the problem', async () => {
    const { writeCatalog } = await import('./router-world.js');
    world.catalogFile = writeCatalog(world.stack.blobDir, (models) => [...models, { ...models[0]!, id: 'Bad/ID' }]);
    await expect(world.startApi()).rejects.toThrow(/Bad\/ID|models\.13\.id/);
  });
});
