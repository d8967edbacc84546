import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { JobEventLog, RunLeases, deletePrefixedKeys, jobKeys, leaseToken } from '#libs/jobs';
import { TEST_REDIS_URL } from '../support/env.js';

describe('run leases: a run paused since its claim cannot take its lease back', () => {
  const prefix = `test-leases-${randomUUID().slice(0, 8)}`;
  const keys = jobKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  const leases = new RunLeases(redis, keys);
  const log = new JobEventLog(redis, keys, 60_000);
  const accountId = randomUUID();
  const first = { workerId: 'pause-a', attempt: 1 };
  const second = { workerId: 'pause-b', attempt: 2 };
  const progress = (jobId: string, lease: typeof first) => log.append(jobId, accountId, 'progress', { value: 1 }, leaseToken(lease));

  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('refuses the first run once another worker took the job over and ended it', async () => {
    const jobId = randomUUID();
    // The first run's claim committed, then its worker stopped before it set its lease.
    await leases.takeBack(jobId, 1);
    expect(await leases.take(jobId, first, 60_000)).toBe(false);
    expect(await progress(jobId, first)).toBeNull();
    // The takeover runs and ends.
    expect(await leases.take(jobId, second, 60_000)).toBe(true);
    expect(await progress(jobId, second)).toEqual(expect.any(String));
    await leases.end(jobId, second.attempt);
    // The first run comes back: neither its lease nor its events get through.
    expect(await leases.take(jobId, first, 60_000)).toBe(false);
    expect(await progress(jobId, first)).toBeNull();
    expect((await log.since(jobId)).map((e) => e.event)).toEqual(['progress']);
    // Left at the attempt it ended with, for a day.
    expect(await redis.get(keys.lease(jobId))).toBe('2');
    expect(await redis.pttl(keys.lease(jobId))).toBeGreaterThan(23 * 3600 * 1000);
  });

  it('refuses an earlier attempt while a later one holds the job, and lets a later one take over', async () => {
    const jobId = randomUUID();
    expect(await leases.take(jobId, second, 60_000)).toBe(true);
    expect(await leases.take(jobId, first, 60_000)).toBe(false);
    expect(await redis.get(keys.lease(jobId))).toBe(leaseToken(second));
    // The same run setting it again (a retried command) keeps it.
    expect(await leases.take(jobId, second, 60_000)).toBe(true);
    const third = { workerId: 'pause-a', attempt: 3 };
    await leases.takeBack(jobId, 2);
    expect(await leases.take(jobId, second, 60_000)).toBe(false);
    expect(await leases.take(jobId, third, 60_000)).toBe(true);
    expect(await progress(jobId, second)).toBeNull();
    expect(await progress(jobId, third)).toEqual(expect.any(String));
  });

  it('leaves nothing behind when a first attempt ends or hands its job back', async () => {
    const jobId = randomUUID();
    expect(await leases.take(jobId, first, 60_000)).toBe(true);
    expect(await redis.pttl(keys.lease(jobId))).toBeGreaterThan(50_000);
    await leases.end(jobId, 1);
    expect(await redis.exists(keys.lease(jobId))).toBe(0);
    // Its next attempt takes the lease as any first one would.
    expect(await leases.take(jobId, second, 60_000)).toBe(true);
  });
});
