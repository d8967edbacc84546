import { Redis } from 'ioredis';
import { LimitsOutbox, type WorkspaceLimits } from '../../apps/api/src/router/limits/limits.outbox.js';
import { TEST_REDIS_URL, uniqueName } from '../support/env.js';

// The batched limit scripts against a real Redis: calls decided together in one turn of the event
// loop get exactly the verdicts they would have got one by one.

describe('router limits, batched per turn of the event loop', () => {
  const prefix = uniqueName('limits_outbox');
  let redis: Redis;
  let outbox: LimitsOutbox;
  let n = 0;

  beforeAll(() => {
    redis = new Redis(TEST_REDIS_URL);
    outbox = new LimitsOutbox(redis);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  /** A workspace of its own: max concurrent, spend cap (cents), calls per window. */
  function workspace(maxConcurrent: number, spendCap: number, windowCalls: number): WorkspaceLimits {
    const base = `${prefix}:{ws${n++}}`;
    return { keys: { inflight: `${base}:inflight`, spend: `${base}:spend`, window: `${base}:window` }, limits: [maxConcurrent, spendCap, windowCalls, 60_000, 30_000] };
  }

  it('decides a burst in order: the first calls up to the concurrency limit pass, the rest are refused', async () => {
    const ws = workspace(3, 1_000, 1_000);
    const verdicts = await Promise.all(Array.from({ length: 6 }, (_, i) => outbox.acquire(ws, `s${i}`, 10)));
    expect(verdicts).toEqual([
      ['ok', 1, 10],
      ['ok', 2, 20],
      ['ok', 3, 30],
      ['concurrency', 3, 0],
      ['concurrency', 3, 0],
      ['concurrency', 3, 0],
    ]);
    expect(await redis.zcard(ws.keys.inflight)).toBe(3);
    expect(await redis.hgetall(ws.keys.spend)).toEqual({ s0: '10', s1: '10', s2: '10' });
  });

  it('refuses on committed spend and on the window allowance, and a cheaper call later in the burst still fits', async () => {
    const spendWs = workspace(100, 25, 1_000);
    const spend = await Promise.all([outbox.acquire(spendWs, 'a', 10), outbox.acquire(spendWs, 'b', 10), outbox.acquire(spendWs, 'c', 10), outbox.acquire(spendWs, 'd', 5)]);
    expect(spend).toEqual([
      ['ok', 1, 10],
      ['ok', 2, 20],
      ['spend', 20, 0],
      ['ok', 3, 25],
    ]);
    const windowWs = workspace(100, 1_000, 2);
    const windowed = await Promise.all([outbox.acquire(windowWs, 'x', 1), outbox.acquire(windowWs, 'y', 1), outbox.acquire(windowWs, 'z', 1)]);
    expect(windowed.map((v) => v[0])).toEqual(['ok', 'ok', 'rate_limited']);
    expect(windowed[2]![1]).toBe(2);
    expect(windowed[2]![2]).toBeGreaterThan(0);
    expect(windowed[2]![2]).toBeLessThanOrEqual(60_000);
  });

  it('sends the releases of a turn before its acquires, so freed slots are taken again at once', async () => {
    const ws = workspace(2, 1_000, 1_000);
    await Promise.all([outbox.acquire(ws, 'one', 1), outbox.acquire(ws, 'two', 1)]);
    const [, , verdict] = await Promise.all([outbox.release(ws.keys, 'one'), outbox.release(ws.keys, 'two'), outbox.acquire(ws, 'three', 1)]);
    expect(verdict).toEqual(['ok', 1, 1]);
    expect(await redis.zrange(ws.keys.inflight, 0, -1)).toEqual(['three']);
  });

  it('keeps workspaces apart within one turn, and splits a burst larger than one script takes', async () => {
    const big = workspace(700, 1_000_000, 1_000_000);
    const small = workspace(1, 1_000, 1_000);
    const [bigVerdicts, smallVerdicts] = await Promise.all([
      Promise.all(Array.from({ length: 650 }, (_, i) => outbox.acquire(big, `b${i}`, 1))),
      Promise.all([outbox.acquire(small, 's0', 1), outbox.acquire(small, 's1', 1)]),
    ]);
    expect(bigVerdicts.every((v, i) => v[0] === 'ok' && v[1] === i + 1)).toBe(true);
    expect(smallVerdicts.map((v) => v[0])).toEqual(['ok', 'concurrency']);
    expect(await redis.zcard(big.keys.inflight)).toBe(650);
  });

  it('fails every call of the turn when Redis cannot be reached', async () => {
    const away = new Redis('redis://127.0.0.1:1', { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
    away.on('error', () => undefined);
    const cut = new LimitsOutbox(away);
    const ws = workspace(5, 1_000, 1_000);
    await expect(Promise.all([cut.acquire(ws, 'p', 1), cut.release(ws.keys, 'q')])).rejects.toThrow();
    away.disconnect();
  });
});
