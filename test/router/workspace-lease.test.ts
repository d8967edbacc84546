import { Redis } from 'ioredis';
import { LimitsOutbox, type Verdict } from '../../apps/api/src/router/limits/limits.outbox.js';
import { WorkspaceLease, type WorkspaceLimits } from '../../apps/api/src/router/limits/workspace-lease.js';
import { TEST_REDIS_URL, uniqueName } from '../support/env.js';

// Replicas' holdings of a workspace's limits against a real Redis: calls the holdings cover are
// admitted without a round trip, Redis decides the rest in order, and however the replicas'
// admissions, releases and refreshes interleave, the limits are never exceeded.

const LEASE_MS = 30_000;

describe('router limits, held by replicas', () => {
  const prefix = uniqueName('limits_lease');
  let redis: Redis;
  let n = 0;

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  /** A workspace of its own, and a function giving each replica (holder) its lease of it. */
  function workspace(maxConcurrent: number, spendCap: number, windowCalls: number) {
    const base = `${prefix}:{ws${n++}}`;
    const keys = { inflight: `${base}:inflight`, slots: `${base}:slots`, spend: `${base}:spend`, window: `${base}:window` };
    const limits: WorkspaceLimits = { maxConcurrent, spendCap, windowCalls, windowMs: 3_600_000 };
    return { keys, replica: (holder: string) => ({ lease: new WorkspaceLease(keys, { ...limits }, LEASE_MS), outbox: new LimitsOutbox(redis, holder, LEASE_MS) }) };
  }

  /** Redis's verdict for calls the holding did not cover; all asked in one turn. */
  function ask({ lease, outbox }: { lease: WorkspaceLease; outbox: LimitsOutbox }, costs: number[]): Promise<Verdict[]> {
    return Promise.all(costs.map((cost) => outbox.acquire(lease, cost)));
  }

  it('decides the calls no holding covers in order, each as if it came alone', async () => {
    const ws = workspace(3, 1_000, 1_000);
    const a = ws.replica('a');
    expect(a.lease.tryAdmit(10, performance.now())).toBe(false); // holds nothing yet
    expect(await ask(a, [10, 10, 10, 10, 10, 10])).toEqual([
      ['ok', 1, 10],
      ['ok', 2, 20],
      ['ok', 3, 30],
      ['concurrency', 3, 0],
      ['concurrency', 3, 0],
      ['concurrency', 3, 0],
    ]);
    // Its three calls in flight and nothing more: a call was refused, so no replica keeps a reserve.
    expect(await redis.hget(ws.keys.slots, 'a')).toBe('3');
    expect(await redis.hget(ws.keys.spend, 'a')).toBe('30');
    expect(a.lease.usedSlots).toBe(3);
    expect(a.lease.tryAdmit(10, performance.now())).toBe(false);

    const spend = workspace(100, 25, 1_000).replica('s');
    expect(await ask(spend, [10, 10, 10, 5])).toEqual([
      ['ok', 1, 10],
      ['ok', 2, 20],
      ['spend', 20, 0],
      ['ok', 3, 25],
    ]);
    const windowed = await ask(workspace(100, 1_000, 2).replica('w'), [1, 1, 1]);
    expect(windowed.map((v) => v[0])).toEqual(['ok', 'ok', 'rate_limited']);
    expect(windowed[2]![1]).toBe(2);
    expect(windowed[2]![2]).toBeGreaterThan(0);
    expect(windowed[2]![2]).toBeLessThanOrEqual(3_600_000);
  });

  it('admits against its holding without asking Redis, up to the holding and no further', async () => {
    const ws = workspace(100, 10_000, 10_000);
    const a = ws.replica('a');
    expect((await ask(a, Array(8).fill(3))).every((v) => v[0] === 'ok')).toBe(true);
    // The eight in flight and a reserve of twice as many (a quarter of what is free allows 23).
    expect(await redis.hget(ws.keys.slots, 'a')).toBe('24');
    expect(await redis.hget(ws.keys.spend, 'a')).toBe('72');
    expect(Number(await redis.hget(ws.keys.window, 'count'))).toBe(16); // 8 calls, a share of 8 more
    const before = await redis.hgetall(ws.keys.slots);
    const now = performance.now();
    const admitted = Array.from({ length: 10 }, () => a.lease.tryAdmit(3, now));
    // The window's share (eight calls, as many as the burst) is what runs out first here.
    expect(admitted).toEqual([...Array(8).fill(true), false, false]);
    expect(a.lease.usedSlots).toBe(16);
    expect(await redis.hgetall(ws.keys.slots)).toEqual(before); // no round trip was made
    // Released here, taken again here.
    a.lease.release(3);
    expect(a.lease.usedSlots).toBe(15);
  });

  it("counts other replicas' holdings but never its own reserve against its own call", async () => {
    const ws = workspace(20, 100_000, 100_000);
    const a = ws.replica('a');
    const b = ws.replica('b');
    await ask(a, [1, 1, 1, 1]); // a holds 4 in flight + 4 reserve (a quarter of the 16 free)
    expect(await redis.hget(ws.keys.slots, 'a')).toBe('8');
    const bVerdicts = await ask(b, Array(16).fill(1));
    expect(bVerdicts.filter((v) => v[0] === 'ok')).toHaveLength(12);
    expect(bVerdicts.filter((v) => v[0] === 'concurrency').every((v) => v[1] === 20)).toBe(true);
    // a's reserve is a's: four more without Redis, then Redis refuses with 20 in flight.
    const now = performance.now();
    expect(Array.from({ length: 4 }, () => a.lease.tryAdmit(1, now))).toEqual([true, true, true, true]);
    expect(a.lease.tryAdmit(1, now)).toBe(false);
    expect(await ask(a, [1])).toEqual([['concurrency', 20, 0]]);
    expect(a.lease.usedSlots + b.lease.usedSlots).toBe(20);
  });

  it("gives another replica's unused reserve back within a check once a call is refused for want of it", async () => {
    const ws = workspace(20, 100_000, 100_000);
    const a = ws.replica('a');
    const b = ws.replica('b');
    await ask(a, [1, 1, 1, 1]);
    expect(await redis.hget(ws.keys.slots, 'a')).toBe('8'); // 4 in flight, 4 in reserve
    expect((await ask(b, Array(13).fill(1))).map((v) => v[0])).toEqual([...Array(12).fill('ok'), 'concurrency']);
    // a asks again within a check (about 100 ms; here its clock is moved on): no reserve is allowed
    // now, so it gives back what its calls do not use.
    const later = performance.now() + 150;
    const check = a.lease.refreshAsk(later)!;
    expect(check).not.toBeNull();
    a.lease.refreshed(await a.outbox.refresh(a.lease, check), later);
    expect(a.lease.overReserve()).toBe(true);
    const giveBack = a.lease.refreshAsk(later)!;
    expect(giveBack).toMatchObject({ floorSlots: 4 });
    a.lease.refreshed(await a.outbox.refresh(a.lease, giveBack), later);
    expect(await redis.hget(ws.keys.slots, 'a')).toBe('4');
    expect(await ask(b, [1])).toEqual([['ok', 17, 17]]);
  });

  it("gives another replica's unused share of the window back once a call is refused rate_limited", async () => {
    const ws = workspace(1_000, 100_000, 40);
    const a = ws.replica('a');
    const b = ws.replica('b');
    await ask(a, [1, 1, 1, 1]);
    expect(await redis.hget(ws.keys.window, 'count')).toBe('8'); // 4 calls and a share of 4 more
    const verdicts = await ask(b, Array(33).fill(1));
    expect(verdicts.filter((v) => v[0] === 'ok')).toHaveLength(32);
    expect(verdicts[32]).toEqual(['rate_limited', 40, expect.any(Number)]);
    // a's next check hears of the refusal and gives its four unused calls back.
    const later = performance.now() + 150;
    a.lease.refreshed(await a.outbox.refresh(a.lease, a.lease.refreshAsk(later)!), later);
    expect(a.lease.windowLeft).toBe(0);
    expect(a.lease.overReserve()).toBe(true);
    a.lease.refreshed(await a.outbox.refresh(a.lease, a.lease.refreshAsk(later)!), later);
    expect(await redis.hget(ws.keys.window, 'count')).toBe('36');
    expect((await ask(b, [1, 1, 1, 1, 1])).map((v) => v[0])).toEqual(['ok', 'ok', 'ok', 'ok', 'rate_limited']);
  });

  it('gives back what ended calls held beyond the reserve at once, and everything once idle', async () => {
    const ws = workspace(4, 1_000, 1_000);
    const a = ws.replica('a');
    await ask(a, [5, 5, 5, 5]); // at the limit: Redis allows no reserve
    a.lease.release(5);
    expect(a.lease.overReserve()).toBe(true);
    const shrink = a.lease.refreshAsk(performance.now())!;
    expect(shrink).toMatchObject({ usedSlots: 3, floorSlots: 3 });
    a.lease.refreshed(await a.outbox.refresh(a.lease, shrink), performance.now());
    expect(await redis.hget(ws.keys.slots, 'a')).toBe('3');
    expect(await redis.hget(ws.keys.spend, 'a')).toBe('55'); // 15 in flight, its reserve of 40
    // Another replica takes the freed slot.
    expect(await ask(ws.replica('b'), [5, 5])).toEqual([
      ['ok', 4, 60],
      ['concurrency', 4, 0],
    ]);

    // Idle (no call for two demand periods): the holding and the window's unused share go back.
    const idle = workspace(100, 1_000, 1_000).replica('i');
    await ask(idle, [1, 1]);
    idle.lease.release(1);
    idle.lease.release(1);
    const windowKey = `${prefix}:{ws${n - 1}}:window`;
    expect(Number(await redis.hget(windowKey, 'count'))).toBeGreaterThan(2);
    const later = performance.now() + 2_000;
    const giveBack = idle.lease.refreshAsk(later)!;
    expect(giveBack).toMatchObject({ floorSlots: 0, floorCents: 0, usedSlots: 0 });
    idle.lease.refreshed(await idle.outbox.refresh(idle.lease, giveBack), later);
    expect(idle.lease.empty()).toBe(true);
    expect(await redis.hget(`${prefix}:{ws${n - 1}}:slots`, 'i')).toBeNull();
    expect(await redis.zcard(`${prefix}:{ws${n - 1}}:inflight`)).toBe(0);
    expect(await redis.hget(windowKey, 'count')).toBe('2'); // the two calls made
  });

  it('never lets more calls be in flight than the limits allow, however three replicas interleave', async () => {
    const limit = 10;
    const cap = 40;
    const ws = workspace(limit, cap, 1_000_000);
    const replicas = ['a', 'b', 'c'].map((name) => ({ ...ws.replica(name), inFlight: [] as number[] }));
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    let clock = performance.now();
    let refusals = 0;
    const total = () => replicas.reduce((sum, r) => sum + r.inFlight.length, 0);
    const spent = () => replicas.reduce((sum, r) => sum + r.inFlight.reduce((s, c) => s + c, 0), 0);
    for (let step = 0; step < 400; step++) {
      clock += random() * 60;
      const r = replicas[Math.floor(random() * 3)]!;
      const action = random();
      if (action < 0.55) {
        // A burst of calls at this replica in one turn: the holding first, Redis for the rest.
        const costs = Array.from({ length: 1 + Math.floor(random() * 4) }, () => 1 + Math.floor(random() * 6));
        const asked: number[] = [];
        for (const cost of costs) {
          if (r.lease.tryAdmit(cost, clock)) r.inFlight.push(cost);
          else asked.push(cost);
        }
        const verdicts = await ask(r, asked);
        verdicts.forEach((v, i) => {
          if (v[0] === 'ok') r.inFlight.push(asked[i]!);
          else refusals++;
        });
      } else if (action < 0.9 && r.inFlight.length > 0) {
        const cost = r.inFlight.splice(Math.floor(random() * r.inFlight.length), 1)[0]!;
        r.lease.release(cost);
      } else {
        const refresh = r.lease.refreshAsk(clock);
        if (refresh) r.lease.refreshed(await r.outbox.refresh(r.lease, refresh), clock);
      }
      expect(total()).toBeLessThanOrEqual(limit);
      expect(spent()).toBeLessThanOrEqual(cap);
      // What Redis counts covers every call in flight.
      const slots = Object.values(await redis.hgetall(ws.keys.slots)).reduce((sum, v) => sum + Number(v), 0);
      expect(slots).toBeGreaterThanOrEqual(total());
      expect(slots).toBeLessThanOrEqual(limit);
    }
    expect(refusals).toBeGreaterThan(0); // the limits were reached, not just approached
  });

  it('admits nothing after a script Redis did not answer, until a refresh sets the holding again', async () => {
    const ws = workspace(100, 10_000, 10_000);
    const a = ws.replica('a');
    await ask(a, [1, 1]);
    a.lease.release(1);
    a.lease.release(1);
    const away = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
    away.on('error', () => undefined);
    const cut = new LimitsOutbox(away, 'a', LEASE_MS);
    await expect(cut.acquire(a.lease, 1)).rejects.toThrow();
    a.lease.failed();
    expect(a.lease.tryAdmit(1, performance.now())).toBe(false);
    const refresh = a.lease.refreshAsk(performance.now())!;
    expect(refresh).not.toBeNull();
    a.lease.refreshed(await a.outbox.refresh(a.lease, refresh), performance.now());
    expect(a.lease.tryAdmit(1, performance.now())).toBe(true);
    away.disconnect();
  });
});
