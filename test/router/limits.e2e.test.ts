import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { Redis } from 'ioredis';
import type { Reply } from '../support/http.js';
import { TEST_REDIS_URL } from '../support/env.js';
import type { RunningProcess } from '../support/processes.js';
import { RouterWorld, eventually, type CatalogFileEntry, expectRequestId, expectRouterError, type Workspace } from './router-world.js';

jest.setTimeout(60_000);

const PARALLEL = 50;
// recraft/recraftv3 (synchronous) and luma/ray-2 (submit-then-poll) stand for their styles. Their
// prices here are the test catalog's, round figures the assertions below count with.
const SYNC = 'recraft/recraftv3';
const AUDIO = 'elevenlabs/eleven_v3';
const speech = (text: string) => ({ voice_id: 'JBFqnCBsd6RMkjVDRZzb', model_id: 'eleven_v3', text });
const video = (prompt: string) => ({ model: 'ray-2', prompt, duration: '5s' });
const prices = (models: CatalogFileEntry[]): CatalogFileEntry[] =>
  models.map((m) => (m.id === SYNC ? { ...m, price_cents: 3 } : m.id === AUDIO ? { ...m, price_cents: 1 } : m.id === 'luma/ray-2' ? { ...m, price_cents: 40 } : m));

describe('router limits, across two API replicas', () => {
  const world = new RouterWorld();
  let second: RunningProcess;
  let redis: Redis;

  beforeAll(async () => {
    await world.open({}, prices);
    second = await world.startApi();
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    redis.disconnect();
    await world.close();
  });

  /** 50 calls at once, alternating between the two replicas. */
  async function burst(ws: Workspace, prompt: string): Promise<Reply[]> {
    world.sim.resetStats();
    return Promise.all(Array.from({ length: PARALLEL }, (_, i) => world.post(ws.token, SYNC, { prompt: `${prompt} #${i}` }, {}, i % 2 ? second : world.api)));
  }

  it('never lets more calls be in flight than the concurrent-call limit', async () => {
    const ws = await world.workspace({ routerMaxConcurrent: 5 });
    const replies = await burst(ws, 'busy hands [[slow:400]]');
    const ok = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status === 429);
    expect(ok.length + refused.length).toBe(PARALLEL);
    expect(ok.length).toBeGreaterThanOrEqual(5);
    expect(world.sim.maxInFlight('recraft')).toBeLessThanOrEqual(5);
    expect(world.sim.maxInFlight('recraft')).toBeGreaterThanOrEqual(2);
    for (const r of refused) {
      expectRouterError(r, 429, 'concurrency_limit_exceeded');
      expect(r.body.detail).toMatch(/concurrent calls/i);
      expect(r.headers.get('x-committed-spend-limit')).toBeNull();
      expect(r.headers.get('x-committed-spend-current')).toBeNull();
    }
    // The limit clears as soon as the caller's own calls finish.
    expect((await world.post(ws.token, SYNC, { prompt: 'after' })).status).toBe(200);
    const rows = await eventually(async () => {
      const n = await world.stack.db.routerCall.count({ where: { accountId: ws.id } });
      return n === PARALLEL + 1 ? n : null;
    });
    expect(rows).toBe(PARALLEL + 1);
    expect(await world.stack.db.routerCall.count({ where: { accountId: ws.id, outcome: 'concurrency_limit_exceeded' } })).toBe(refused.length);
  });

  it('never lets the committed spend of in-flight calls exceed the cap, and says so in headers', async () => {
    // recraft/recraftv3 costs 3 cents here: with a 10-cent cap at most three calls are in flight.
    const ws = await world.workspace({ routerMaxConcurrent: 1000, routerSpendCapCents: 10 });
    const replies = await burst(ws, 'spendy [[slow:400]]');
    const ok = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status === 429);
    expect(ok.length + refused.length).toBe(PARALLEL);
    expect(ok.length).toBeGreaterThanOrEqual(3);
    expect(refused.length).toBeGreaterThan(0);
    expect(world.sim.maxInFlight('recraft')).toBeLessThanOrEqual(3);
    for (const r of refused) {
      expectRouterError(r, 429, 'concurrency_limit_exceeded');
      expect(r.body.detail).toMatch(/committed spend/i);
      const limit = Number(r.headers.get('x-committed-spend-limit'));
      const current = Number(r.headers.get('x-committed-spend-current'));
      const remaining = Number(r.headers.get('x-committed-spend-remaining'));
      expect(limit).toBe(10);
      expect(current + 3).toBeGreaterThan(limit);
      expect(current).toBeLessThanOrEqual(limit);
      expect(remaining).toBe(Math.max(0, limit - current));
    }
    // A call that alone costs more than the cap is refused even with nothing in flight.
    const tiny = await world.workspace({ routerSpendCapCents: 2 });
    const alone = await world.post(tiny.token, SYNC, { prompt: 'x' });
    expectRouterError(alone, 429, 'concurrency_limit_exceeded');
    expect([alone.headers.get('x-committed-spend-limit'), alone.headers.get('x-committed-spend-current'), alone.headers.get('x-committed-spend-remaining')]).toEqual(['2', '0', '2']);
  });

  it("a call refused while another replica holds an unused reserve gets in on its retry after Retry-After", async () => {
    const ws = await world.workspace({ routerMaxConcurrent: 8 });
    const slots = `${world.stack.redisPrefix}:router:{${ws.id}}:slots`;
    const heldInAll = async () => Object.values(await redis.hgetall(slots)).reduce((sum, v) => sum + Number(v), 0);
    world.sim.resetStats();
    // Four long calls on one replica: it holds them and a reserve of one (a quarter of the 4 free).
    const first = Array.from({ length: 4 }, (_, i) => world.post(ws.token, SYNC, { prompt: `held on one #${i} [[slow:3000]]` }));
    await eventually(async () => world.sim.requests('recraft').filter((r) => r.body.includes('held on one')).length === 4);
    expect(await heldInAll()).toBe(5);
    // On the other replica, three fit beside that holding; the fourth is refused with 7 in flight.
    const others = Array.from({ length: 4 }, (_, i) => world.post(ws.token, SYNC, { prompt: `on the other #${i} [[slow:3000]]` }, {}, second));
    const refused = await Promise.race(others.map((p) => p.then((r) => (r.status === 429 ? r : new Promise<never>(() => undefined)))));
    expectRouterError(refused, 429, 'concurrency_limit_exceeded');
    expect(refused.headers.get('retry-after')).toBe('1');
    // The refusal takes every reserve away: the first replica gives its unused slot back.
    await eventually(async () => ((await heldInAll()) === 7 ? true : null), 2_000);
    await sleep(1_000);
    expect((await world.post(ws.token, SYNC, { prompt: 'the retry' }, {}, second)).status).toBe(200);
    expect(world.sim.maxInFlight('recraft')).toBeLessThanOrEqual(8);
    const statuses = (await Promise.all([...first, ...others])).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 429]);
  });

  it('rate_limited once the windowed allowance is used up; detail names the window', async () => {
    const ws = await world.workspace({ routerWindowCalls: 5, routerWindowSeconds: 3600 });
    const replies: Reply[] = [];
    for (let i = 0; i < 8; i++) replies.push(await world.post(ws.token, SYNC, { prompt: `w${i}` }, {}, i % 2 ? second : world.api));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    for (const r of replies.slice(5)) {
      expectRouterError(r, 429, 'rate_limited');
      expect(r.body.detail).toMatch(/5 calls per 3600-second window/);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    // 50 parallel calls against a fresh allowance of 10: exactly 10 get through.
    const burstWs = await world.workspace({ routerWindowCalls: 10, routerWindowSeconds: 3600 });
    const statuses = (await burst(burstWs, 'windowed')).map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(40);
  });

  it.each([
    // An allowance of two: a replica takes a share of the window only out of a quarter of what is free.
    ['one call in flight', { routerMaxConcurrent: 1, routerWindowCalls: 2 }],
    ['one call per window', { routerWindowCalls: 1 }],
  ])('duplicates with one Idempotency-Key at a limit of %s: one dispatch, all join it, none refused', async (limit, limits) => {
    const ws = await world.workspace(limits);
    const prompt = `ten twins at ${limit} [[slow:300]]`;
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, i) => world.post(ws.token, SYNC, { prompt }, { 'idempotency-key': 'twins-at-limit' }, i % 2 ? second : world.api)),
    );
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(world.sim.requests('recraft', { method: 'POST' }).filter((r) => r.body.includes(prompt))).toHaveLength(1);
    // Only the dispatch counts against the window; the duplicates that joined it do not.
    expect(await redis.hget(`${world.stack.redisPrefix}:router:{${ws.id}}:window`, 'count')).toBe('1');
  });

  it('a keyed call a limit refuses lets its key go: recorded as refused, and the key dispatches later', async () => {
    const ws = await world.workspace({ routerMaxConcurrent: 1 });
    const busy = world.post(ws.token, SYNC, { prompt: 'holds the only slot [[slow:400]]' });
    await eventually(async () => world.sim.requests('recraft').some((r) => r.body.includes('holds the only slot')));
    const refused = await world.post(ws.token, SYNC, { prompt: 'keyed, refused first' }, { 'idempotency-key': 'refused-then-run' });
    expectRouterError(refused, 429, 'concurrency_limit_exceeded');
    expect((await busy).status).toBe(200);
    const later = await world.post(ws.token, SYNC, { prompt: 'keyed, refused first' }, { 'idempotency-key': 'refused-then-run' });
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBeNull();
    expect(await eventually(() => world.stack.db.routerCall.findUnique({ where: { id: expectRequestId(refused) } }))).toMatchObject({
      outcome: 'concurrency_limit_exceeded',
      idempotencyKey: null,
      charged: false,
    });
  });

  it('parallel calls on one replica never spend past the credit balance: each holds its price while in flight', async () => {
    const ws = await world.workspace({}, 10n);
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => world.post(ws.token, SYNC, { prompt: `thrifty #${i} [[slow:300]]` })));
    // recraft/recraftv3 costs 3 here: three calls fit in 10.
    expect(replies.filter((r) => r.status === 200)).toHaveLength(3);
    for (const refused of replies.filter((r) => r.status !== 200)) expectRouterError(refused, 402, 'insufficient_credits');
    const balance = async () => (await world.stack.db.account.findUniqueOrThrow({ where: { id: ws.id } })).creditBalance;
    await eventually(async () => ((await balance()) === 1n ? true : null));
    // A call that ends uncharged gives its held price back at once: the next call can spend it.
    // (elevenlabs/eleven_v3 costs 1 here, the balance left.)
    expectRouterError(await world.post(ws.token, AUDIO, speech('flaky [[fail]]')), 502, 'provider_error');
    expect((await world.post(ws.token, AUDIO, speech('one more'))).status).toBe(200);
    expectRouterError(await world.post(ws.token, AUDIO, speech('one too many')), 402, 'insufficient_credits');
  });

  it("frees a crashed replica's holding when its lease expires", async () => {
    const ws = await world.workspace({ routerMaxConcurrent: 1 });
    const inflight = `${world.stack.redisPrefix}:router:{${ws.id}}:inflight`;
    const slots = `${world.stack.redisPrefix}:router:{${ws.id}}:slots`;
    const spend = `${world.stack.redisPrefix}:router:{${ws.id}}:spend`;
    const [seconds] = await redis.time();
    // A replica's holding (one slot, 3 cents) whose lease is still running blocks the workspace...
    await redis.zadd(inflight, (Number(seconds) + 60) * 1000, 'ghost-live');
    await redis.hset(slots, 'ghost-live', 1);
    await redis.hset(spend, 'ghost-live', 3);
    expectRouterError(await world.post(ws.token, SYNC, { prompt: 'x' }), 429, 'concurrency_limit_exceeded');
    // ...one whose lease ran out (its replica stopped renewing it) does not.
    await redis.zadd(inflight, (Number(seconds) - 1) * 1000, 'ghost-live');
    expect((await world.post(ws.token, SYNC, { prompt: 'x' })).status).toBe(200);
    expect(await redis.zscore(inflight, 'ghost-live')).toBeNull();
    expect(await redis.hget(slots, 'ghost-live')).toBeNull();
    expect(await redis.hget(spend, 'ghost-live')).toBeNull();
  });
});

describe('router Idempotency-Key', () => {
  const world = new RouterWorld();
  let ws: Workspace;
  let second: RunningProcess;

  beforeAll(async () => {
    // The router lets go at 600 ms; the partners' generations below take longer.
    await world.open({ ROUTER_DEADLINE_MS: '600' }, prices);
    second = await world.startApi({ ROUTER_DEADLINE_MS: '600' });
    ws = await world.workspace();
  });
  afterAll(() => world.close());

  const balance = async () => (await world.stack.db.account.findUniqueOrThrow({ where: { id: ws.id } })).creditBalance;

  it('submit-then-poll: a retry after deadline_exceeded collects the accepted generation, dispatched exactly once', async () => {
    const body = video('a long video [[slow:2000]]');
    const key = 'video-001';
    const before = await balance();
    const first = await world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': key });
    expectRouterError(first, 504, 'deadline_exceeded');
    const retryAfter = Number(first.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    const firstId = expectRequestId(first);

    // On the other replica, which never saw the call: it follows the handle, still running.
    const early = await world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': key }, second);
    expectRouterError(early, 504, 'deadline_exceeded');
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    await new Promise((r) => setTimeout(r, retryAfter * 1000));
    const retry = await world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': key }, second);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body.state).toBe('completed');
    expect(expectRequestId(retry)).not.toBe(firstId);

    const again = await world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': key });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(retry.text);

    expect(world.sim.requests('luma', { method: 'POST' }).filter((r) => r.body.includes('a long video'))).toHaveLength(1);
    const original = await eventually(async () => {
      const row = await world.stack.db.routerCall.findUnique({ where: { id: firstId } });
      return row?.charged && row.outcome ? row : null;
    });
    expect(original).toMatchObject({ outcome: 'deadline_exceeded', resultBucket: 'success', providerHandle: retry.body.id, idempotencyKey: key });
    expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: firstId } })).toBe(1);
    expect(before - (await balance())).toBe(40n);
    const replays = await eventually(async () => {
      const rows = await world.stack.db.routerCall.findMany({ where: { replayOf: firstId } });
      return rows.length === 3 ? rows : null;
    });
    expect(replays.every((r) => r.charged === false)).toBe(true);
    expect(replays.map((r) => r.outcome).sort()).toEqual(['deadline_exceeded', 'success', 'success']);
  });

  it('synchronous partner: the retry waits on the same in-flight call; no Retry-After without a handle', async () => {
    const body = { prompt: 'slow sync [[slow:1400]]' };
    const first = await world.post(ws.token, SYNC, body, { 'idempotency-key': 'sync-001' });
    expectRouterError(first, 504, 'deadline_exceeded');
    expect(first.headers.get('retry-after')).toBeNull();
    let retry = await world.post(ws.token, SYNC, body, { 'idempotency-key': 'sync-001' });
    if (retry.status === 504) retry = await world.post(ws.token, SYNC, body, { 'idempotency-key': 'sync-001' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(world.sim.requests('recraft', { method: 'POST' }).filter((r) => r.body.includes('slow sync')).at(-1)!.answer!.body.replace(/"url":"[^"]+"/, `"url":${JSON.stringify(retry.body.data[0].url)}`));
    expect(world.sim.requests('recraft', { method: 'POST' }).filter((r) => r.body.includes('slow sync'))).toHaveLength(1);
  });

  it('concurrent duplicates dispatch once and all get the same result', async () => {
    const body = { prompt: 'twins [[slow:200]]' };
    const replies = await Promise.all(Array.from({ length: 10 }, () => world.post(ws.token, SYNC, body, { 'idempotency-key': 'dup-001' })));
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
    expect(replies.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(9);
    expect(world.sim.requests('recraft', { method: 'POST' }).filter((r) => r.body.includes('twins'))).toHaveLength(1);
  });

  it('replays a completed result, refuses the key with another body, and frees it after a provider failure', async () => {
    const done = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'a.wav' }, { 'idempotency-key': 'k-1' });
    expect(done.status).toBe(200);
    expect(done.headers.get('idempotent-replayed')).toBeNull();
    // The credits a call used are said once, not on its replays (which cost nothing).
    expect(done.headers.get('x-service-credits-used')).toBe('4');
    const replay = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'a.wav' }, { 'idempotency-key': 'k-1' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('x-service-credits-used')).toBeNull();
    expect(replay.text).toBe(done.text);
    expect(world.sim.requests('bfl', { method: 'POST' }).filter((r) => r.body.includes('a.wav'))).toHaveLength(1);

    expectRouterError(await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'b.wav' }, { 'idempotency-key': 'k-1' }), 409, 'invalid_input');
    expectRouterError(await world.post(ws.token, SYNC, { prompt: 'a.wav' }, { 'idempotency-key': 'k-1' }), 409, 'invalid_input');

    // A deterministic refusal is replayed as it was.
    const refused = await world.post(ws.token, SYNC, { prompt: 'no [[refuse]]' }, { 'idempotency-key': 'k-2' });
    const refusedAgain = await world.post(ws.token, SYNC, { prompt: 'no [[refuse]]' }, { 'idempotency-key': 'k-2' });
    expect([refused.status, refusedAgain.status]).toEqual([422, 422]);
    expect(refusedAgain.headers.get('x-service-error-type')).toBe('content_policy_violation');
    expect(refusedAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(refusedAgain.text).toBe(refused.text);

    // A provider failure frees the key: the retry dispatches anew.
    expectRouterError(await world.post(ws.token, SYNC, { prompt: 'flaky [[fail]]' }, { 'idempotency-key': 'k-3' }), 502, 'provider_error');
    expectRouterError(await world.post(ws.token, SYNC, { prompt: 'flaky [[fail]]' }, { 'idempotency-key': 'k-3' }), 502, 'provider_error');
    expect(world.sim.requests('recraft', { method: 'POST' }).filter((r) => r.body.includes('flaky'))).toHaveLength(2);
  });

  it('calls whose replica died are on record and ended once past their deadline: key freed, never charged', async () => {
    const doomed = await world.startApi({ ROUTER_DEADLINE_MS: '600' });
    const before = await balance();
    const keyed = world.post(ws.token, SYNC, { prompt: 'orphan [[slow:3000]]' }, { 'idempotency-key': 'orphan-001' }, doomed).catch(() => null);
    const unkeyed = world.post(ws.token, SYNC, { prompt: 'stray [[slow:3000]]' }, {}, doomed).catch(() => null);
    const running = (where: object) => eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: ws.id, state: 'running', ...where } }));
    const keyedRow = await running({ idempotencyKey: 'orphan-001' });
    const unkeyedRow = await running({ requestHash: null });
    await doomed.stop('SIGKILL');
    await Promise.all([keyed, unkeyed]);
    const ids = [keyedRow.id, unkeyedRow.id];
    // While the model's deadline (5 s here) and the grace after it have not passed, a live replica
    // may yet finish such a call: the rows are left alone.
    await new Promise((r) => setTimeout(r, 6_000));
    expect(await world.stack.db.routerCall.findUniqueOrThrow({ where: { id: keyedRow.id } })).toMatchObject({ state: 'running', idempotencyKey: 'orphan-001' });
    expect(await world.stack.db.routerCall.findUniqueOrThrow({ where: { id: unkeyedRow.id } })).toMatchObject({ state: 'running', modelId: SYNC });
    // Past both (the rows are made older rather than waited out), the sweep of a surviving replica ends them.
    await world.stack.db.$executeRaw`UPDATE router_calls SET created_at = created_at - interval '31 seconds' WHERE id = ANY(${ids})`;
    const ended = await eventually(async () => {
      const rows = await world.stack.db.routerCall.findMany({ where: { id: { in: ids }, state: 'abandoned' } });
      return rows.length === 2 ? rows : null;
    });
    for (const row of ended) {
      expect(row).toMatchObject({ idempotencyKey: null, outcome: 'internal_error', charged: false, durationMs: null });
      expect(row.completedAt).not.toBeNull();
    }
    // The key dispatches anew.
    const retry = await world.post(ws.token, SYNC, { prompt: 'orphan [[slow:10]]' }, { 'idempotency-key': 'orphan-001' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBeNull();
    expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: { in: ids } } })).toBe(0);
    await eventually(async () => (before - (await balance()) === 3n ? true : null));
  }, 30_000);

  it('an unkeyed call is on record while it runs, then completed once and charged once', async () => {
    const before = await balance();
    const call = world.post(ws.token, SYNC, { prompt: 'tracked [[slow:400]]' });
    const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: ws.id, state: 'running', requestHash: null } }));
    expect(row).toMatchObject({ outcome: null, charged: false, modelId: SYNC, costCents: 3 });
    const reply = await call;
    expect(reply.status).toBe(200);
    expect(expectRequestId(reply)).toBe(row.id);
    const done = await eventually(async () => {
      const found = await world.stack.db.routerCall.findUniqueOrThrow({ where: { id: row.id } });
      return found.state === 'completed' ? found : null;
    });
    expect(done).toMatchObject({ outcome: 'success', resultBucket: 'success', httpStatus: 200, charged: true });
    expect(done.durationMs).toBeGreaterThanOrEqual(400);
    expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: row.id } })).toBe(1);
    expect(before - (await balance())).toBe(3n);
  });

  it('a retry collects, past its deadline, a generation whose replica died before storing it', async () => {
    const doomed = await world.startApi({ ROUTER_DEADLINE_MS: '600' });
    const before = await balance();
    const body = video('finished alone [[slow:1500]]');
    const first = world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': 'alone-001' }, doomed).catch(() => null);
    const row = await eventually(() => world.stack.db.routerCall.findFirst({ where: { accountId: ws.id, idempotencyKey: 'alone-001', providerHandle: { not: null } } }));
    await doomed.stop('SIGKILL');
    await first;
    // Past the model's deadline (5 s here): the provider finished the generation long ago.
    await new Promise((r) => setTimeout(r, row.createdAt.getTime() + 5_300 - Date.now()));
    let retry = await world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': 'alone-001' });
    // On a slow machine the collection may outlast this retry's 600 ms: the next retry joins it.
    if (retry.status === 504) retry = await world.post(ws.token, 'luma/ray-2', body, { 'idempotency-key': 'alone-001' });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.body.state).toBe('completed');
    expect(world.sim.requests('luma', { method: 'POST' }).filter((r) => r.body.includes('finished alone'))).toHaveLength(1);
    expect(await world.stack.db.creditLedgerEntry.count({ where: { ref: row.id } })).toBe(1);
    expect(before - (await balance())).toBe(40n);
  }, 30_000);

  it('keys are per workspace', async () => {
    const other = await world.workspace();
    const a = await world.post(ws.token, 'bfl/flux-pro-1.1', { prompt: 'shared.wav' }, { 'idempotency-key': 'shared' });
    const b = await world.post(other.token, 'bfl/flux-pro-1.1', { prompt: 'shared.wav' }, { 'idempotency-key': 'shared' });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(world.sim.requests('bfl', { method: 'POST' }).filter((r) => r.body.includes('shared.wav'))).toHaveLength(2);
  });
});

describe('router deadline no later than the provider\'s own', () => {
  const world = new RouterWorld();
  let ws: Workspace;

  beforeAll(async () => {
    // The router lets go at 1 s, and luma/ray-2's provider deadline is 1 s too.
    await world.open({ ROUTER_DEADLINE_MS: '1000' }, (models) => models.map((m) => (m.id === 'luma/ray-2' ? { ...m, timeout_ms: 1_000 } : m)));
    ws = await world.workspace();
  });
  afterAll(() => world.close());

  it("answers the generation's own ending, not a deadline_exceeded whose retry would find it ended and dispatch again", async () => {
    const body = video('too long [[slow:3000]]');
    for (const headers of [{ 'idempotency-key': 'late-001' }, {}] as Record<string, string>[]) {
      const reply = await world.post(ws.token, 'luma/ray-2', body, headers);
      expectRouterError(reply, 504, 'provider_timeout');
      expect(reply.headers.get('retry-after')).toBeNull();
    }
  });
});
