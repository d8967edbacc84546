import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { JobEventLog, compareStreamIds, deletePrefixedKeys, jobKeys, parsePublishedJobEvent, type StoredJobEvent } from '#libs/jobs';
import { TEST_REDIS_URL } from '../support/env.js';

describe('job event log: a long job trims its progress, never its statuses and outputs', () => {
  const prefix = `test-events-${randomUUID().slice(0, 8)}`;
  const keys = jobKeys(prefix);
  const redis = new Redis(TEST_REDIS_URL);
  // A small window, so a test-sized job overflows it as an hours-long one overflows the real one.
  const log = new JobEventLog(redis, keys, 60_000, 100);
  const accountId = randomUUID();

  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const append = (jobId: string, event: 'status' | 'progress' | 'output', data: unknown) => log.append(jobId, accountId, event, data);
  const names = (events: StoredJobEvent[]) => events.map((e) => `${e.event}:${e.data}`);
  const expectOrderedAndUnique = (events: StoredJobEvent[]) => {
    for (let i = 1; i < events.length; i++) expect(compareStreamIds(events[i - 1]!.id, events[i]!.id)).toBeLessThan(0);
  };

  it('gives a client resuming from before the kept window every status and output it missed, once, in order', async () => {
    const jobId = randomUUID();
    const firstId = await append(jobId, 'status', { status: 'queued' });
    await append(jobId, 'status', { status: 'running' });
    const early = await append(jobId, 'output', { node_id: '9', n: 1 });
    let lastEarlyProgress = '';
    for (let i = 0; i < 1_000; i++) lastEarlyProgress = await append(jobId, 'progress', { value: i });
    await append(jobId, 'output', { node_id: '12', n: 2 });
    for (let i = 0; i < 10; i++) await append(jobId, 'progress', { value: 1_000 + i });
    const lastId = await append(jobId, 'status', { status: 'succeeded' });

    // The log itself lost its beginning.
    const raw = await redis.xrange(keys.events(jobId), '-', '+');
    expect(raw.length).toBeLessThan(1_000);
    expect(raw.some(([id]) => id === early)).toBe(false);

    // Resumed just after the first event: the rest of the statuses and both outputs, then what
    // the log kept, each event once and in id order.
    const resumed = await log.since(jobId, firstId);
    expectOrderedAndUnique(resumed);
    const kept = names(resumed).filter((n) => !n.startsWith('progress:'));
    expect(kept).toEqual(['status:{"status":"running"}', 'output:{"node_id":"9","n":1}', 'output:{"node_id":"12","n":2}', 'status:{"status":"succeeded"}']);
    expect(resumed.at(-1)!.id).toBe(lastId);
    expect(resumed.filter((e) => e.event === 'progress').length).toBe(raw.filter(([, f]) => f[1] === 'progress').length);

    // From the start, as a connecting client reads it: the first status too.
    const all = await log.since(jobId);
    expectOrderedAndUnique(all);
    expect(names(all).filter((n) => n.startsWith('status:')).length).toBe(3);

    // Resumed inside the kept window: nothing before it comes back.
    const late = await log.since(jobId, lastEarlyProgress);
    expectOrderedAndUnique(late);
    expect(names(late)).toEqual([
      'output:{"node_id":"12","n":2}',
      ...Array.from({ length: 10 }, (_, i) => `progress:{"value":${1_000 + i}}`),
      'status:{"status":"succeeded"}',
    ]);
    expect(await log.since(jobId, lastId)).toEqual([]);
  });

  it('reads an untrimmed log as it is, and drops both streams with the job', async () => {
    const jobId = randomUUID();
    for (const status of ['queued', 'running']) await append(jobId, 'status', { status });
    await append(jobId, 'progress', { value: 1 });
    await append(jobId, 'output', { node_id: '9' });
    await append(jobId, 'status', { status: 'succeeded' });
    const raw = await redis.xrange(keys.events(jobId), '-', '+');
    expect((await log.since(jobId)).map((e) => e.id)).toEqual(raw.map(([id]) => id));
    expect(await redis.xlen(keys.keptEvents(jobId))).toBe(4);
    await log.drop(jobId);
    expect(await redis.exists(keys.events(jobId), keys.keptEvents(jobId))).toBe(0);
  });

  it('logs one event for several jobs in one command as append logs it for each: both streams, expiry, the published message', async () => {
    const jobs = [randomUUID(), randomUUID(), randomUUID()].map((jobId, i) => ({ jobId, accountId: `${accountId.slice(0, -1)}${i}` }));
    const listener = new Redis(TEST_REDIS_URL);
    const messages: string[] = [];
    listener.on('message', (_channel: string, message: string) => messages.push(message));
    await listener.subscribe(keys.jobEventsChannel);
    try {
      const ids = await log.appendToMany(jobs, 'status', { status: 'queued', queue_position: null });
      expect(ids).toHaveLength(3);
      for (const [i, { jobId }] of jobs.entries()) {
        expect(await log.since(jobId)).toEqual([{ id: ids[i], event: 'status', data: '{"status":"queued","queue_position":null}' }]);
        expect(await redis.xrange(keys.keptEvents(jobId), '-', '+')).toEqual(await redis.xrange(keys.events(jobId), '-', '+'));
        expect(await redis.pttl(keys.events(jobId))).toBeGreaterThan(50_000);
        expect(await redis.pttl(keys.keptEvents(jobId))).toBeGreaterThan(50_000);
      }
      // The same message as append publishes, parsed by the same reader.
      const single = randomUUID();
      await append(single, 'status', { status: 'queued', queue_position: null });
      for (let i = 0; i < 50 && messages.length < 4; i++) await new Promise((r) => setTimeout(r, 20));
      const published = messages.map((m) => parsePublishedJobEvent(m));
      expect(published.slice(0, 3)).toEqual(jobs.map(({ jobId, accountId: owner }, i) => ({ id: ids[i], jobId, accountId: owner, event: 'status', data: '{"status":"queued","queue_position":null}' })));
      expect(published[3]).toMatchObject({ jobId: single, accountId, event: 'status', data: '{"status":"queued","queue_position":null}' });
      expect(await log.appendToMany([], 'status', {})).toEqual([]);
    } finally {
      listener.disconnect();
    }
  });
});
