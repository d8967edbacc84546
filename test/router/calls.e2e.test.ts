import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { Redis } from 'ioredis';
import pg from 'pg';
import { call, type Reply } from '../support/http.js';
import { TEST_REDIS_URL } from '../support/env.js';
import { SIM_PROVIDERS } from '../../apps/partner-sim/src/server.js';
import { RouterWorld, eventually, expectRequestId, expectRouterError, expectValidation, tinySchemaDocument, type Workspace } from './router-world.js';

jest.setTimeout(60_000);

// Router deadline 1.5 s. Provider deadlines: recraft/recraftv3 400 ms, every other model 5 s.
// openai/gpt-image-1 (synchronous JSON) stands for the synchronous models, luma/ray-2 for the
// submit-then-poll ones; this suite's catalog makes openai's policy refusals charged (`yes`), as
// no shipped model's are, so both billing rules are exercised (providers.e2e covers the shipped ones).
const DEADLINE_MS = 1_500;
const IMAGE = 'openai/gpt-image-1';
const img = (prompt: string, extra: Record<string, unknown> = {}) => ({ model: 'gpt-image-1', prompt, ...extra });
const video = (prompt: string) => ({ model: 'ray-2', prompt, duration: '5s' });

describe('router calls', () => {
  const world = new RouterWorld();
  let ws: Workspace;

  beforeAll(async () => {
    await world.open({ ROUTER_DEADLINE_MS: String(DEADLINE_MS) }, (models) =>
      models.map((m) => (m.id === 'recraft/recraftv3' ? { ...m, timeout_ms: 400 } : m.id === IMAGE ? { ...m, charges_on_policy_rejection: 'yes' } : m)),
    );
    ws = await world.workspace();
  });
  afterAll(() => world.close());

  const record = (id: string, settled = true) =>
    eventually(async () => {
      const row = await world.stack.db.routerCall.findUnique({ where: { id } });
      return row && (!settled || row.outcome !== null) ? row : null;
    });

  describe('pass the native JSON through unchanged', () => {
    it('synchronous JSON: the body reaches the partner byte for byte and the result comes back byte for byte', async () => {
      const text = '{"model":"gpt-image-1","prompt":"a lighthouse at dusk, \\u00e9t\\u00e9 ✨",  "n": 1.0 ,"size":"1024x1024"}';
      const before = (await world.stack.db.account.findUniqueOrThrow({ where: { id: ws.id } })).creditBalance;
      const reply = await world.post(ws.token, IMAGE, text);
      expect(reply.status).toBe(200);
      expect(reply.headers.get('x-service-error-type')).toBeNull();
      expect(reply.headers.get('x-content-type-options')).toBe('nosniff');
      const id = expectRequestId(reply);
      const received = world.sim.requests('openai', { method: 'POST' }).at(-1)!;
      expect(received.body).toBe(text);
      expect(reply.text).toBe(received.answer!.body);
      expect(reply.body.data[0].b64_json).toMatch(/^[A-Za-z0-9+/]+=*$/);
      expect(reply.headers.get('x-service-credits-used')).toBe('17');

      const row = await record(id);
      expect(row).toMatchObject({ accountId: ws.id, modelId: IMAGE, outcome: 'success', resultBucket: 'success', charged: true, costCents: 17, httpStatus: 200 });
      expect(row.durationMs).toBeGreaterThanOrEqual(0);
      const ledger = await world.stack.db.creditLedgerEntry.findMany({ where: { ref: id } });
      expect(ledger.map((l) => [l.reason, l.amount])).toEqual([['router_call', -17n]]);
      const after = (await world.stack.db.account.findUniqueOrThrow({ where: { id: ws.id } })).creditBalance;
      expect(before - after).toBe(17n);
    });

    it('takes a +json media type as JSON, after authentication like any call', async () => {
      const text = '{"model":"gpt-image-1","prompt":"a lighthouse",  "n": 1}';
      const send = (headers: Record<string, string>) =>
        call(`${world.api.url}/v1/models/${IMAGE}`, { method: 'POST', headers: { 'content-type': 'application/vnd.api+json; charset=utf-8', ...headers }, body: text });
      expectRouterError(await send({}), 401, 'unauthorized');
      const reply = await send({ authorization: `Bearer ${ws.token}` });
      expect(reply.status).toBe(200);
      expect(world.sim.requests('openai', { method: 'POST' }).at(-1)!.body).toBe(text);
      expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'success', charged: true });
    });

    it("returns a partner's binary answer with its own media type", async () => {
      const speak = (format: string) =>
        fetch(`${world.api.url}/v1/models/elevenlabs/eleven_v3`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ws.token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ voice_id: 'JBFqnCBsd6RMkjVDRZzb', model_id: 'eleven_v3', text: 'hello there', output_format: format }),
        });
      const res = await speak('mp3_44100_128');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('audio/mpeg');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      const audio = Buffer.from(await res.arrayBuffer());
      expect(audio.length).toBe(2048);
      expect(audio.subarray(0, 4)).toEqual(Buffer.from([0xff, 0xfb, 0x90, 0x64]));
      const pcm = await speak('pcm_16000');
      expect(pcm.headers.get('content-type')).toBe('audio/pcm');
    });

    it('submit-then-poll: holds the connection, polls, and returns the finished generation as the partner wrote it', async () => {
      const reply = await world.post(ws.token, 'luma/ray-2', video('a slow pan over hills [[slow:200]]'));
      expect(reply.status).toBe(200);
      expect(reply.body.state).toBe('completed');
      expect(reply.body.assets.video).toMatch(new RegExp(`^${world.api.url}/blobs/[0-9a-f]{64}\\?`));
      const polls = world.sim.requests('luma', { method: 'GET' }).filter((r) => r.path.endsWith(reply.body.id));
      expect(polls.length).toBeGreaterThan(1);
      const row = await record(expectRequestId(reply));
      expect(row).toMatchObject({ outcome: 'success', charged: true, costCents: 200, providerHandle: reply.body.id });
    });

    it('a partner that validates with FastAPI 422s: success passes through', async () => {
      const reply = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'make it blue', width: 512, height: 512 });
      expect(reply.status).toBe(200);
      expect(reply.body.status).toBe('Ready');
    });
  });

  describe('invalid_input', () => {
    it('checks the body against the model schema: 422 with loc, msg, type, ctx and input', async () => {
      const posted = world.sim.received.length;
      const reply = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'x', width: 100, safety_tolerance: 9, output_format: 'gif', extra: true });
      const entries = expectValidation(reply, 'invalid_input');
      const byType = Object.fromEntries(entries.map((e) => [`${e.loc.join('.')}:${e.type}`, e]));
      expect(byType['body.width:greater_than_equal']).toMatchObject({ ctx: { ge: 256 }, input: 100 });
      expect(byType['body.width:multiple_of']).toMatchObject({ ctx: { multiple_of: 32 }, input: 100 });
      expect(byType['body.safety_tolerance:less_than_equal']).toMatchObject({ ctx: { le: 6 }, input: 9 });
      expect(byType['body.output_format:enum']).toMatchObject({ input: 'gif' });
      expect(byType['body.extra:extra_forbidden']).toMatchObject({ input: true });
      const short = expectValidation(await world.post(ws.token, IMAGE, img('')), 'invalid_input');
      expect(short).toEqual([{ loc: ['body', 'prompt'], msg: expect.any(String), type: 'string_too_short', ctx: { min_length: 1 }, input: '' }]);
      const format = expectValidation(await world.post(ws.token, 'recraft/recraftv3', { prompt: 'x', style_id: 'not a uuid' }), 'invalid_input');
      expect(format).toEqual(expect.arrayContaining([expect.objectContaining({ loc: ['body', 'style_id'], type: 'value_error', ctx: { format: 'uuid' } })]));
      const required = expectValidation(await world.post(ws.token, IMAGE, {}), 'invalid_input');
      expect(required.map((e) => `${e.loc.join('.')}:${e.type}`).sort()).toEqual(['body.model:missing', 'body.prompt:missing']);
      const notObject = expectValidation(await world.post(ws.token, IMAGE, '[1,2]'), 'invalid_input');
      expect(notObject[0]).toMatchObject({ loc: ['body'], type: 'dict_type', input: [1, 2] });
      expect(world.sim.received.length).toBe(posted);
      const row = await record(expectRequestId(reply));
      expect(row).toMatchObject({ outcome: 'invalid_input', charged: false, httpStatus: 422 });
    });

    it('a JSON body of null is input the schema refuses, like any other JSON that is not an object', async () => {
      const posted = world.sim.requests('openai').length;
      for (const [text, input] of [
        ['null', null],
        ['5', 5],
        ['"str"', 'str'],
        ['[]', []],
      ] as const) {
        const reply = await world.post(ws.token, IMAGE, text);
        expect(expectValidation(reply, 'invalid_input')).toEqual([{ loc: ['body'], msg: expect.any(String), type: 'dict_type', input }]);
        expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'invalid_input', httpStatus: 422, charged: false });
      }
      expect(world.sim.requests('openai').length).toBe(posted);
    });

    it('refuses malformed bodies and keys with 400', async () => {
      expectRouterError(await world.post(ws.token, IMAGE, '{"prompt": "x"'), 400, 'invalid_input');
      expectRouterError(await world.post(ws.token, IMAGE, ''), 400, 'invalid_input');
      const noBody = await call(`${world.api.url}/v1/models/${IMAGE}`, { method: 'POST', headers: { authorization: `Bearer ${ws.token}` } });
      expectRouterError(noBody, 400, 'invalid_input');
      const text = await call(`${world.api.url}/v1/models/${IMAGE}`, { method: 'POST', headers: { authorization: `Bearer ${ws.token}`, 'content-type': 'text/plain' }, body: '{"prompt":"x"}' });
      expectRouterError(text, 400, 'invalid_input');
      const form = await call(`${world.api.url}/v1/models/${IMAGE}`, { method: 'POST', headers: { authorization: `Bearer ${ws.token}` }, body: new URLSearchParams({ prompt: 'x' }) });
      expect(form.headers.get('x-service-error-type')).toBe('invalid_input');
      expect(form.body.error_type).toBe('invalid_input');
      expectRouterError(await world.post(ws.token, IMAGE, img('x'), { 'idempotency-key': 'k'.repeat(256) }), 400, 'invalid_input');
    });

    it('answers a body that is not JSON only after authentication, and records it', async () => {
      const malformed = '{"prompt": "x"';
      const tooDeep = `{"prompt": ${'['.repeat(300)}${']'.repeat(300)}}`;
      const poisoned = '{"prompt": "x", "__proto__": {"admin": true}}';
      const post = (headers: Record<string, string>, body: string) =>
        call(`${world.api.url}/v1/models/${IMAGE}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

      // Whatever the body, a caller without a usable credential hears only that.
      const off = await world.workspace({ routerEnabled: false });
      for (const body of [malformed, tooDeep]) {
        expectRouterError(await post({}, body), 401, 'unauthorized');
        expectRouterError(await post({ authorization: 'Bearer not-a-token' }, body), 401, 'unauthorized');
        expectRouterError(await post({ authorization: `Bearer ${off.token}` }, body), 403, 'not_enabled');
      }

      // An authenticated caller gets invalid_input, and the call has its usage and audit record.
      const posted = world.sim.requests('openai').length;
      for (const body of [malformed, tooDeep, poisoned]) {
        const reply = await post({ authorization: `Bearer ${ws.token}`, 'idempotency-key': `unparsed-${body.length}` }, body);
        expectRouterError(reply, 400, 'invalid_input');
        const row = await record(expectRequestId(reply));
        expect(row).toMatchObject({ accountId: ws.id, modelId: IMAGE, outcome: 'invalid_input', httpStatus: 400, charged: false, idempotencyKey: null });
        expect(row.durationMs).toBeGreaterThanOrEqual(0);
        expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: row.id } })).toBe(0);
      }
      expect(world.sim.requests('openai').length).toBe(posted);
    });

    it('answers a body of another type, or of none, only after authentication, and records it', async () => {
      const send = (headers: Record<string, string>, body: string | Uint8Array) =>
        call(`${world.api.url}/v1/models/${IMAGE}`, { method: 'POST', headers, body });
      const xml = { 'content-type': 'application/xml' };
      expectRouterError(await send(xml, '<prompt>x</prompt>'), 401, 'unauthorized');
      // A Uint8Array goes without any content type.
      expectRouterError(await send({}, new TextEncoder().encode('{"prompt": "x"}')), 401, 'unauthorized');

      const posted = world.sim.requests('openai').length;
      const auth = { authorization: `Bearer ${ws.token}` };
      const bodies: [Record<string, string>, string | Uint8Array][] = [
        [{ ...auth, ...xml }, '<prompt>x</prompt>'],
        [{ ...auth, 'content-type': 'application/x-www-form-urlencoded' }, 'prompt=x'],
        [auth, new TextEncoder().encode('{"prompt": "x"}')],
      ];
      for (const [headers, body] of bodies) {
        const reply = await send(headers, body);
        expectRouterError(reply, 400, 'invalid_input');
        expect(await record(expectRequestId(reply))).toMatchObject({ accountId: ws.id, outcome: 'invalid_input', charged: false });
      }
      expect(world.sim.requests('openai').length).toBe(posted);
    });

    it("passes a partner's own validation errors through unchanged, unknown types included", async () => {
      const before = world.sim.requests('bfl').length;
      const reply = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'x [[invalid]]', width: 1024 });
      expectValidation(reply, 'invalid_input');
      expect(reply.text).toBe(world.sim.requests('bfl').at(-1)!.answer!.body);
      expect(reply.body.detail.map((d: { type: string }) => d.type)).toEqual(['multiple_of', 'prompt_unsupported_glyphs']);
      expect(world.sim.requests('bfl').length).toBe(before + 1);
      expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'invalid_input', charged: false });
    });
  });

  describe('content_policy_violation', () => {
    it('is a 422 whose only bucket is the header; charged as each model states', async () => {
      const charged = await world.post(ws.token, IMAGE, img('forbidden [[refuse]]'));
      expect(expectValidation(charged, 'content_policy_violation')[0]).toMatchObject({ loc: ['body'], type: 'moderation_blocked' });
      expect(await record(expectRequestId(charged))).toMatchObject({ outcome: 'content_policy_violation', charged: true, costCents: 17 });

      const free = await world.post(ws.token, 'recraft/recraftv3', { prompt: 'forbidden [[refuse]]' });
      expectValidation(free, 'content_policy_violation');
      expect(await record(expectRequestId(free))).toMatchObject({ outcome: 'content_policy_violation', charged: false });
      const models = (await world.get(ws.token, '/v1/models?limit=100')).body.data;
      expect(models.find((m: { id: string }) => m.id === IMAGE).billing.charges_on_policy_rejection).toBe('yes');
      expect(models.find((m: { id: string }) => m.id === 'recraft/recraftv3').billing.charges_on_policy_rejection).toBe('no');
      expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: expectRequestId(free) } })).toBe(0);
    });

    it('is recognised in every partner style', async () => {
      const bfl = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'x [[refuse]]' });
      expect(bfl.text).toBe('{"detail":[{"loc":["body"],"msg":"Moderated: Derivative Works Filter","type":"Request Moderated"}]}');
      const luma = await world.post(ws.token, 'luma/ray-2', video('x [[refuse-output]]'));
      expect(expectValidation(luma, 'content_policy_violation')[0]).toMatchObject({ type: 'generation_failed_moderation', msg: 'Generation failed because the output did not pass moderation' });
    });
  });

  describe('provider_error', () => {
    it.each([
      [IMAGE, img('x [[fail]]'), /server had an error/],
      [IMAGE, img('x [[garbage]]'), /cannot interpret/],
      [IMAGE, img('x [[empty]]'), /empty/],
      // A JSON model's schema document declares only JSON results: an HTML page is no result.
      [IMAGE, img('x [[html]]'), /cannot interpret/],
      // An audio model's schema declares audio results: a JSON document is no result either.
      ['elevenlabs/eleven_v3', { voice_id: 'JBFqnCBsd6RMkjVDRZzb', model_id: 'eleven_v3', text: 'x [[json]]' }, /cannot interpret/],
      // The partner refusing the router's own credentials: the caller learns nothing of them.
      [IMAGE, img('x [[denied]]'), /^(?!.*(sim-openai-key|Incorrect)).*refused the router's credentials/],
      ['bfl/flux-pro-1.1', { prompt: 'x [[html]]' }, /cannot interpret/],
      ['luma/ray-2', video('x [[fail]]'), /Internal error while dreaming/],
      ['luma/ray-2', video('x [[garbage]]'), /cannot interpret/],
      ['luma/ray-2', video('x [[weird]]'), /cannot interpret/],
    ])('%s %j answers 502 provider_error', async (model, body, detail) => {
      const reply = await world.post(ws.token, model, body);
      expectRouterError(reply, 502, 'provider_error');
      expect(reply.body.detail).toMatch(detail);
      expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'provider_error', charged: false, modelId: model });
    });
  });

  describe('timeouts', () => {
    it('provider_timeout: the provider missed its own deadline (or its gateway said so)', async () => {
      const started = Date.now();
      const slow = await world.post(ws.token, 'recraft/recraftv3', { prompt: 'x [[slow:1200]]' });
      expectRouterError(slow, 504, 'provider_timeout');
      expect(Date.now() - started).toBeLessThan(1_100);
      expect(slow.headers.get('retry-after')).toBeNull();
      expectRouterError(await world.post(ws.token, IMAGE, img('x [[gw504]]')), 504, 'provider_timeout');
      expect(await record(expectRequestId(slow))).toMatchObject({ outcome: 'provider_timeout', charged: false });
    });

    it('deadline_exceeded: the router stops holding the connection; a generation that completes later is still billed', async () => {
      const started = Date.now();
      const reply = await world.post(ws.token, IMAGE, img('x [[slow:2500]]'));
      const waited = Date.now() - started;
      expectRouterError(reply, 504, 'deadline_exceeded');
      expect(waited).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
      expect(waited).toBeLessThan(2_400);
      expect(reply.headers.get('retry-after')).toBeNull(); // no key, no handle
      const row = await record(expectRequestId(reply));
      // The record says what the caller got, and when; the generation's own ending is beside it.
      expect(row).toMatchObject({ outcome: 'deadline_exceeded', httpStatus: 504, resultBucket: 'success', charged: true });
      expect(row.durationMs).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
      expect(row.durationMs).toBeLessThan(2_400);
    });
  });

  describe('service_unavailable', () => {
    it('a provider that is overloaded or unreachable', async () => {
      expectRouterError(await world.post(ws.token, IMAGE, img('x [[busy]]')), 503, 'service_unavailable');
      expectRouterError(await world.post(ws.token, 'luma/ray-2', video('x [[busy]]')), 503, 'service_unavailable');
      const api = await world.startApi({ ROUTER_UPSTREAM_BASE_URLS: SIM_PROVIDERS.map((p) => `${p}=http://127.0.0.1:9`).join(',') });
      const reply = await world.post(ws.token, IMAGE, img('x'), {}, api);
      expectRouterError(reply, 503, 'service_unavailable');
      expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'service_unavailable', charged: false });
      await api.stop();
    });

    it('Redis, which holds the limits, goes away', async () => {
      const redis = await redisProxy();
      const api = await world.startApi({ REDIS_URL: redis.url });
      // Its own workspace: a holding of a replica cut from Redis only ends with its lease.
      const cut = await world.workspace();
      expect((await world.post(cut.token, IMAGE, img('x'), {}, api)).status).toBe(200);
      await redis.cut();
      // What the replica holds already (after one call: a share of the window for one more) still
      // admits; Redis counts it. Past it, nothing is dispatched that Redis has not decided.
      const replies = await Promise.all(Array.from({ length: 5 }, (_, i) => world.post(cut.token, IMAGE, img(`cut #${i}`), {}, api)));
      const refused = replies.filter((r) => r.status !== 200);
      expect(replies.length - refused.length).toBeLessThanOrEqual(1);
      expect(refused.length).toBeGreaterThanOrEqual(4);
      for (const reply of refused) {
        expectRouterError(reply, 503, 'service_unavailable');
        expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'service_unavailable' });
      }
      await api.stop();
    });

    it('a holding Redis could not be told about is given back once Redis is back, and counted out once', async () => {
      const redis = await redisProxy();
      const api = await world.startApi({ REDIS_URL: redis.url });
      const held = await world.workspace();
      const inflight = `${world.stack.redisPrefix}:router:{${held.id}}:inflight`;
      const direct = new Redis(TEST_REDIS_URL);
      try {
        const pending = world.post(held.token, IMAGE, img('x [[slow:600]]'), {}, api);
        await eventually(async () => ((await direct.zcard(inflight)) === 1 ? true : null));
        await redis.cut();
        expect((await pending).status).toBe(200);
        // Idle, the replica gives its holding back, but Redis is away: the holding stays counted.
        await sleep(1_500);
        expect(await direct.zcard(inflight)).toBe(1);
        await redis.restore();
        await eventually(async () => ((await direct.zcard(inflight)) === 0 ? true : null));
        const metrics = (await call(`${api.url}/metrics`)).text;
        expect(metrics).toMatch(/^router_inflight_spend_cents 0$/m);
      } finally {
        direct.disconnect();
        await redis.cut();
        await api.stop();
      }
    });
  });

  it('insufficient_credits: 402 before anything is dispatched', async () => {
    const poor = await world.workspace({}, 0n);
    const before = world.sim.requests('openai').length;
    const reply = await world.post(poor.token, IMAGE, img('x'));
    expectRouterError(reply, 402, 'insufficient_credits');
    expect(world.sim.requests('openai').length).toBe(before);
    expect(await record(expectRequestId(reply))).toMatchObject({ accountId: poor.id, outcome: 'insufficient_credits', charged: false });
  });

  describe('insufficient_credits against a balance the charges have not reached yet', () => {
    const balance = async (id: string) => (await world.stack.db.account.findUniqueOrThrow({ where: { id } })).creditBalance;

    it('sequential calls on one API stop with 402 as soon as the balance cannot pay another, also once the cache reloads', async () => {
      // 20 credits, 17 per call: the second call must be refused, not the fifth.
      const poor = await world.workspace({}, 20n);
      const before = world.sim.requests('openai', { method: 'POST' }).length;
      expect((await world.post(poor.token, IMAGE, img('x'))).status).toBe(200);
      expectRouterError(await world.post(poor.token, IMAGE, img('x')), 402, 'insufficient_credits');
      // Past the account cache's freshness: served stale once, then reloaded from the database.
      await sleep(2_500);
      expectRouterError(await world.post(poor.token, IMAGE, img('x')), 402, 'insufficient_credits');
      await sleep(300);
      expectRouterError(await world.post(poor.token, IMAGE, img('x')), 402, 'insufficient_credits');
      expect(world.sim.requests('openai', { method: 'POST' }).length - before).toBe(1);
      expect(await eventually(async () => ((await balance(poor.id)) === 3n ? true : null))).toBe(true);
    });

    it('a cache reload does not bring back a balance from before a charge the batch has not written yet', async () => {
      const poor = await world.workspace({}, 20n);
      const db = world.stack.db;
      // The database refuses this workspace's usage records (and so its charges) until the trigger goes.
      await db.$executeRawUnsafe("CREATE FUNCTION refuse_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'test: usage may not be written yet'; END $$");
      await db.$executeRawUnsafe(`CREATE TRIGGER refuse_usage BEFORE INSERT ON router_calls FOR EACH ROW WHEN (NEW.account_id = '${poor.id}') EXECUTE FUNCTION refuse_usage()`);
      let first: Awaited<ReturnType<typeof world.post>>;
      try {
        first = await world.post(poor.token, IMAGE, img('x'));
        expect(first.status).toBe(200);
        expectRouterError(await world.post(poor.token, IMAGE, img('x')), 402, 'insufficient_credits');
        await sleep(2_500);
        // Starts a reload, which reads 20 credits: the charge is not in the database yet.
        expectRouterError(await world.post(poor.token, IMAGE, img('x')), 402, 'insufficient_credits');
        await sleep(300);
        expect(await balance(poor.id)).toBe(20n);
        expectRouterError(await world.post(poor.token, IMAGE, img('x')), 402, 'insufficient_credits');
      } finally {
        await db.$executeRawUnsafe('DROP TRIGGER refuse_usage ON router_calls');
        await db.$executeRawUnsafe('DROP FUNCTION refuse_usage()');
      }
      expect(await record(expectRequestId(first))).toMatchObject({ outcome: 'success', charged: true });
      expect(await eventually(async () => ((await balance(poor.id)) === 3n ? true : null))).toBe(true);
    });
  });

  it('model_not_found on a call, with suggestions, recorded', async () => {
    const reply = await world.post(ws.token, 'bfl/flux-pro-1.11', { prompt: 'x' });
    expectRouterError(reply, 404, 'model_not_found');
    expect(reply.body.detail).toContain('bfl/flux-pro-1.1');
    expect(await record(expectRequestId(reply))).toMatchObject({ modelId: 'bfl/flux-pro-1.11', outcome: 'model_not_found' });
  });

  it('unauthorized, not_enabled and forbidden on a call', async () => {
    expectRouterError(await world.post('nope', IMAGE, img('x')), 401, 'unauthorized');
    const off = await world.workspace({ routerEnabled: false });
    expectRouterError(await world.post(off.token, IMAGE, img('x')), 403, 'not_enabled');
    const narrow = await world.workspace({ routerEntitlements: ['luma/*'] });
    const reply = await world.post(narrow.token, IMAGE, img('x'));
    expectRouterError(reply, 403, 'forbidden');
    expect(await record(expectRequestId(reply))).toMatchObject({ accountId: narrow.id, outcome: 'forbidden' });
  });

  it('not_enabled and an inactive workspace, refused before the call runs, are recorded under the request id', async () => {
    const off = await world.workspace({ routerEnabled: false });
    const inactive = await world.workspace({ status: 'inactive' });
    for (const [refused, bucket] of [
      [off, 'not_enabled'],
      [inactive, 'forbidden'],
    ] as const) {
      const reply = await world.post(refused.token, IMAGE, img('x'));
      expectRouterError(reply, 403, bucket);
      const row = await record(expectRequestId(reply));
      expect(row).toMatchObject({ accountId: refused.id, modelId: IMAGE, outcome: bucket, httpStatus: 403, charged: false, costCents: 0 });
      expect(row.durationMs).toBeGreaterThanOrEqual(0);
    }
    // Reading the catalog is not a call: nothing is recorded for it.
    expectRouterError(await world.get(off.token, '/v1/models'), 403, 'not_enabled');
    await new Promise((r) => setTimeout(r, 200));
    expect(await world.stack.db.routerCall.count({ where: { accountId: off.id } })).toBe(1);
  });

  it('client_disconnected: recorded, not delivered; the finished generation is billed', async () => {
    const aborter = new AbortController();
    const sent = world.post(ws.token, IMAGE, img('walk away [[slow:600]]'), {}, world.api, aborter.signal);
    await eventually(async () => world.sim.requests('openai').some((r) => r.body.includes('walk away')));
    aborter.abort();
    await expect(sent).rejects.toThrow();
    const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: ws.id, outcome: 'client_disconnected' } }));
    expect(row).toMatchObject({ modelId: IMAGE, resultBucket: 'success', charged: true, httpStatus: 499 });
  });

  it('client_disconnected before the handler runs: nothing is dispatched, the call is recorded', async () => {
    // The caller sends its whole request and leaves while the router's guard still holds it. To
    // make that moment certain, the accounts table is locked, so the guard's first load of this
    // new workspace waits; the caller leaves once that load is seen waiting, and the lock is let go
    // only after the API has closed the connection. The handler then starts with the response
    // already closed ('close' has fired): the call must be recorded, and not dispatched.
    const leaving = await world.workspace();
    const lock = new pg.Client({ connectionString: world.stack.databaseUrl });
    await lock.connect();
    const socket = net.connect(world.api.port, '127.0.0.1');
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE');
      const body = JSON.stringify(img('left before the handler'));
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.on('error', () => undefined);
      socket.write(
        `POST /v1/models/${IMAGE} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${leaving.token}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      // Read on another connection: inside its transaction, the lock's own would see one snapshot.
      await eventually(async () => {
        const waiting = await world.stack.db.$queryRaw<unknown[]>`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%accounts%'`;
        return waiting.length > 0;
      });
      socket.end();
      await closed;
    } finally {
      socket.destroy();
      await lock.query('ROLLBACK');
      await lock.end();
    }
    const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: leaving.id } }));
    expect(row).toMatchObject({ modelId: IMAGE, outcome: 'client_disconnected', httpStatus: 499, resultBucket: null, charged: false });
    expect(world.sim.requests('openai').filter((r) => r.body.includes('left before the handler'))).toHaveLength(0);
    expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: row.id } })).toBe(0);
  });

  it('client_disconnected while the body is still being sent: recorded for the token\'s workspace, nothing dispatched', async () => {
    const cut = await world.workspace();
    const body = JSON.stringify({ prompt: 'cut off mid-body '.repeat(50) });
    for (const token of [cut.token, 'not-a-token']) {
      const socket = net.connect(world.api.port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        `POST /v1/models/${IMAGE} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 100)}`,
      );
      await sleep(200);
      socket.destroy();
    }
    const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: cut.id } }));
    expect(row).toMatchObject({ modelId: IMAGE, outcome: 'client_disconnected', httpStatus: 499, resultBucket: null, charged: false, state: 'completed' });
    expect(world.sim.requests('openai').filter((r) => r.body.includes('cut off mid-body'))).toHaveLength(0);
    // A whole call afterwards is one more record, not a second one for the cut call.
    expect((await world.post(cut.token, IMAGE, img('whole'))).status).toBe(200);
    await eventually(async () => (await world.stack.db.routerCall.count({ where: { accountId: cut.id, state: 'completed' } })) === 2);
    await sleep(300);
    expect(await world.stack.db.routerCall.count({ where: { accountId: cut.id } })).toBe(2);
  });

  it('keeps storing a keyed result while the database refuses it; then it is replayed and billed once', async () => {
    // A trigger makes the database refuse this key's final state until the test drops it.
    const key = 'store-retry-001';
    const db = world.stack.db;
    await db.$executeRawUnsafe("CREATE FUNCTION refuse_store() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'test: this result may not be stored yet'; END $$");
    await db.$executeRawUnsafe(`CREATE TRIGGER refuse_store BEFORE UPDATE ON router_calls FOR EACH ROW WHEN (OLD.idempotency_key = '${key}' AND NEW.state = 'completed') EXECUTE FUNCTION refuse_store()`);
    const body = img('store retry');
    const from = world.api.output.length;
    const sent = world.post(ws.token, IMAGE, body, { 'idempotency-key': key });
    try {
      // The API says it failed and will retry; from then on the database takes the write again.
      await eventually(async () => world.api.output.slice(from).some((line) => line.includes('not stored yet')));
    } finally {
      await db.$executeRawUnsafe('DROP TRIGGER refuse_store ON router_calls');
      await db.$executeRawUnsafe('DROP FUNCTION refuse_store()');
    }
    const first = await sent;
    expect(first.status).toBe(200);
    const id = expectRequestId(first);
    expect(await db.routerCall.findUnique({ where: { id } })).toMatchObject({ state: 'completed', resultBucket: 'success', charged: true, idempotencyKey: key });
    expect(await db.creditLedgerEntry.count({ where: { ref: id } })).toBe(1);

    const retry = await world.post(ws.token, IMAGE, body, { 'idempotency-key': key });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(world.sim.requests('openai', { method: 'POST' }).filter((r) => r.body.includes('store retry'))).toHaveLength(1);
  });

  it('keeps usage records while the database refuses them, however long, and dispatches nothing meanwhile', async () => {
    const cut = await world.workspace();
    const db = world.stack.db;
    // A trigger makes the database refuse this workspace's records until the test drops it.
    await db.$executeRawUnsafe("CREATE FUNCTION refuse_usage() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'test: usage may not be written yet'; END $$");
    await db.$executeRawUnsafe(`CREATE TRIGGER refuse_usage BEFORE INSERT ON router_calls FOR EACH ROW WHEN (NEW.account_id = '${cut.id}') EXECUTE FUNCTION refuse_usage()`);
    const from = world.api.output.length;
    const tries = () => world.api.output.slice(from).filter((line) => line.includes('usage records not written yet')).length;
    let first: Reply;
    let refused: Reply;
    try {
      first = await world.post(cut.token, IMAGE, img('unrecorded [[slow:200]]'));
      await eventually(async () => tries() > 0);
      refused = await world.post(cut.token, IMAGE, img('not now'));
      // More tries than the writer made before it gave up.
      await eventually(async () => tries() >= 7, 20_000);
    } finally {
      await db.$executeRawUnsafe('DROP TRIGGER refuse_usage ON router_calls');
      await db.$executeRawUnsafe('DROP FUNCTION refuse_usage()');
    }
    expect(first.status).toBe(200);
    expectRouterError(refused, 503, 'service_unavailable');
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(world.sim.requests('openai', { method: 'POST' }).filter((r) => r.body.includes('not now'))).toHaveLength(0);
    const firstId = expectRequestId(first);
    const written = await eventually(async () => {
      const row = await db.routerCall.findUnique({ where: { id: firstId } });
      return row?.state === 'completed' ? row : null;
    });
    expect(written).toMatchObject({ outcome: 'success', charged: true });
    expect(await db.creditLedgerEntry.count({ where: { ref: firstId } })).toBe(1);
    expect(await eventually(() => db.routerCall.findUnique({ where: { id: expectRequestId(refused) } }))).toMatchObject({ outcome: 'service_unavailable', charged: false });
    // Written again: calls dispatch again.
    expect((await world.post(cut.token, IMAGE, img('recorded again'))).status).toBe(200);
  }, 40_000);

  it('a keyed duplicate gets the failure of the generation it waited on, on either replica; a later retry dispatches anew', async () => {
    const other = await world.startApi({ ROUTER_DEADLINE_MS: String(DEADLINE_MS) });
    try {
      const key = 'fails-while-waited-on';
      const body = img('doomed [[slow:1000]] [[fail]]');
      const posts = () => world.sim.requests('openai', { method: 'POST' }).filter((r) => r.body.includes('doomed'));
      const first = world.post(ws.token, IMAGE, body, { 'idempotency-key': key });
      await eventually(async () => posts().length === 1);
      // Both arrive while the generation runs: one on the replica running it, one on another.
      const [original, sameReplica, otherReplica] = await Promise.all([
        first,
        world.post(ws.token, IMAGE, body, { 'idempotency-key': key }),
        world.post(ws.token, IMAGE, body, { 'idempotency-key': key }, other),
      ]);
      expectRouterError(original, 502, 'provider_error');
      expect(original.headers.get('idempotent-replayed')).toBeNull();
      for (const duplicate of [sameReplica, otherReplica]) {
        expectRouterError(duplicate, 502, 'provider_error');
        expect(duplicate.headers.get('idempotent-replayed')).toBe('true');
        expect(duplicate.text).toBe(original.text);
      }
      expect(posts()).toHaveLength(1);
      const originalId = expectRequestId(original);
      const replays = await eventually(async () => {
        const rows = await world.stack.db.routerCall.findMany({ where: { replayOf: originalId } });
        return rows.length === 2 ? rows : null;
      });
      expect(replays.map((r) => [r.outcome, r.charged])).toEqual([
        ['provider_error', false],
        ['provider_error', false],
      ]);

      // The failure is not kept for replay: a retry after it dispatches again, whichever replica it reaches.
      const retry = await world.post(ws.token, IMAGE, body, { 'idempotency-key': key }, other);
      expectRouterError(retry, 502, 'provider_error');
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      expect(posts()).toHaveLength(2);
    } finally {
      await other.stop();
    }
  });

  it('a stopping API waits for the generation of a caller it already answered, then records and bills it', async () => {
    const api = await world.startApi({ ROUTER_DEADLINE_MS: '300' });
    const reply = await world.post(ws.token, IMAGE, img('answered, still running [[slow:1500]]'), {}, api);
    expectRouterError(reply, 504, 'deadline_exceeded');
    const id = expectRequestId(reply);
    // SIGTERM while the provider still works on the generation; resolves once the process exited.
    await api.stop();
    expect(world.sim.requests('openai').filter((r) => r.body.includes('answered, still running'))).toHaveLength(1);
    expect(await world.stack.db.routerCall.findUnique({ where: { id } })).toMatchObject({ outcome: 'deadline_exceeded', resultBucket: 'success', charged: true });
    expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: id } })).toBe(1);
  });

  it('internal_error: a failure inside the router is a 500 in the router shape, never a stack', async () => {
    // A catalog row the router has no adapter for (as if written by a newer release).
    const id = 'openai/legacy-model';
    await world.stack.db.routerModel.create({
      data: { id, provider: 'openai', model: 'legacy-model', adapterKind: 'carrier-pigeon', upstreamUrl: `${world.sim.url}/openai/v1/x`, inputSchema: {}, inputSchemaText: tinySchemaDocument(id), priceCents: 1, chargesOnPolicyRejection: 'no' },
    });
    const reply = await eventually(async () => {
      const r = await world.post(ws.token, id, { prompt: 'x' });
      return r.status === 404 ? null : r;
    });
    expectRouterError(reply, 500, 'internal_error');
    expect(reply.text).not.toMatch(/at .*\.js/);
    expect(await record(expectRequestId(reply))).toMatchObject({ outcome: 'internal_error', charged: false });
  });

  it('headers too large for the HTTP parser: a router path still gets the router shape and both headers', async () => {
    const exchange = (raw: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(world.api.port, '127.0.0.1');
        let text = '';
        socket.setEncoding('utf8');
        socket.on('data', (d: string) => (text += d));
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
        socket.write(raw);
      });
    const big = `X-Big: ${'a'.repeat(20_000)}\r\n`;
    const auth = `Authorization: Bearer ${ws.token}\r\n`;
    for (const head of [`POST /v1/models/${IMAGE} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 2\r\n${big}\r\n{}`, `GET /v1/models HTTP/1.1\r\nHost: x\r\n${big}\r\n`]) {
      const text = await exchange(head);
      const [rawHead = '', body = ''] = text.split('\r\n\r\n');
      expect(rawHead).toMatch(/^HTTP\/1\.1 431 /);
      expect(rawHead).toMatch(/\r\nx-service-request-id: [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\r\n/i);
      expect(rawHead).toMatch(/\r\nx-service-error-type: invalid_input\r\n/i);
      expect(rawHead).toMatch(/\r\ncontent-type: application\/json/i);
      expect(JSON.parse(body)).toEqual({ detail: expect.any(String), error_type: 'invalid_input' });
    }
    // Other paths keep the v2 envelope.
    const other = await exchange(`GET /api/v2/jobs HTTP/1.1\r\nHost: x\r\n${big}\r\n`);
    expect(other).toMatch(/^HTTP\/1\.1 431 /);
    expect(other).not.toMatch(/x-service-/i);
    expect(JSON.parse(other.split('\r\n\r\n')[1]!)).toMatchObject({ error: { code: 'invalid_request' } });
  });

  it('every response carries a fresh X-Service-Request-Id that names its usage record', async () => {
    const replies = await Promise.all([1, 2, 3].map(() => world.post(ws.token, 'recraft/recraftv3', { prompt: 'a map of the harbour' })));
    const ids = replies.map(expectRequestId);
    expect(new Set(ids).size).toBe(3);
    for (const id of ids) expect(await record(id)).toMatchObject({ accountId: ws.id, modelId: 'recraft/recraftv3', outcome: 'success' });
    // A client-supplied request id is not taken as the router's id.
    const own = await world.post(ws.token, 'recraft/recraftv3', { prompt: 'a map of the harbour' }, { 'x-request-id': 'mine-123' });
    expect(expectRequestId(own)).not.toBe('mine-123');
  });

  it('releases every slot whatever the ending', async () => {
    const redis = new Redis(TEST_REDIS_URL);
    try {
      const key = `${world.stack.redisPrefix}:router:{${ws.id}}:inflight`;
      await eventually(async () => (await redis.zcard(key)) === 0, 8_000);
      expect(await redis.zcard(key)).toBe(0);
      expect(await redis.hlen(`${world.stack.redisPrefix}:router:{${ws.id}}:spend`)).toBe(0);
    } finally {
      redis.disconnect();
    }
  });
});

/** A TCP proxy in front of Redis that a test can cut (every connection closed, none accepted) and restore on the same port. */
async function redisProxy(): Promise<{ url: string; cut(): Promise<void>; restore(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const target = new URL(TEST_REDIS_URL);
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  const listen = (port: number) => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    cut: () =>
      new Promise<void>((resolve) => {
        if (!server.listening) return resolve();
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
        sockets.clear();
      }),
    restore: () => listen(port),
  };
}
