import { Readable } from 'node:stream';
import { Redis } from 'ioredis';
import { blobSurvived, createAssetRecord, deleteAssetsAndOrphanBlobs, recordUploadedAsset } from '#libs/assets';
import { loadConfig } from '#libs/config';
import { Prisma } from '#libs/db';
import type { Queue } from 'bullmq';
import { createRunQueue, Dispatcher, JobEventLog, jobKeys, lateJobsQuery, Sweeper, WorkerRegistry, type JobKeys, type RunPayload } from '#libs/jobs';
import { createBlobStore, type BlobStore } from '#libs/storage';
import { TestStack } from '../support/stack.js';

// The sweeper's passes, run directly against real PostgreSQL, Redis and S3.
describe('sweeper', () => {
  const stack = new TestStack('s3');
  let redis: Redis;
  let store: BlobStore;
  let keys: JobKeys;
  let queue: Queue<RunPayload>;
  let events: JobEventLog;
  let sweeper: Sweeper;
  let registry: WorkerRegistry;
  let dispatcher: Dispatcher;
  const db = () => stack.db;
  /** The real store, with its byte deletion replaced: to pause it, or make it fail. */
  const withDelete = (remove: (hash: string) => Promise<void>): BlobStore =>
    new Proxy(store, { get: (target, name) => (name === 'delete' ? remove : (Reflect.get(target, name) as (...args: unknown[]) => unknown).bind(target)) });

  beforeAll(async () => {
    await stack.open();
    redis = new Redis(stack.services.redisUrl);
    store = createBlobStore(loadConfig(stack.env()));
    keys = jobKeys(stack.redisPrefix);
    queue = createRunQueue({ url: stack.services.redisUrl } as never, keys);
    registry = new WorkerRegistry(redis, keys);
    events = new JobEventLog(redis, keys, 60_000);
    dispatcher = new Dispatcher(db(), redis, queue, keys);
    sweeper = new Sweeper(db(), redis, queue, registry, dispatcher, events, store, keys, {
      creditsPerSecond: 1,
      maxAttempts: 2,
      deadlineGraceMs: 30_000,
      // Time enough for every batch on a slow machine: the batching, not the speed, is under test.
      passBudgetMs: 300_000,
    });
  });
  afterAll(async () => {
    await queue.close();
    redis.disconnect();
    await stack.close();
  });

  // Retention must keep pace with submissions: a pass that deleted a fixed handful of jobs would
  // fall behind for good at a few hundred jobs a second, and the tables would grow without end.
  it('deletes a backlog of expired jobs several batches deep in one pass, with their outputs and orphaned blobs', async () => {
    const account = await stack.account({ name: 'retained' });
    const past = new Date(Date.now() - 1_000);
    const total = 1_234;
    await db().job.createMany({
      data: Array.from({ length: total }, () => ({ accountId: account.id, workflow: {}, status: 'succeeded' as const, expiresAt: past })),
    });
    const kept = await db().job.create({ data: { accountId: account.id, workflow: {}, status: 'succeeded', expiresAt: new Date(Date.now() + 3_600_000) } });
    const expired = await db().job.findMany({ where: { expiresAt: past }, select: { id: true }, orderBy: { id: 'asc' } });

    // Outputs of expired jobs: one blob only they use, one also held by a live upload.
    const output = async (text: string, i: number) =>
      (await recordUploadedAsset(db(), await store.put(Readable.from([Buffer.from(text)])), { accountId: account.id, filePath: `out/${i}.png`, contentType: 'image/png', jobId: expired[i * 500]!.id, expiresAt: past })).blobHash;
    const orphaned = await output('only expired outputs use this', 0);
    await createAssetRecord(db(), { accountId: account.id, blobHash: orphaned, filePath: 'out/1.png', contentType: 'image/png', jobId: expired[500]!.id, expiresAt: past });
    const shared = await output('a live upload uses this too', 2);
    const upload = await createAssetRecord(db(), { accountId: account.id, blobHash: shared, filePath: 'in/live.png', contentType: 'image/png' });
    await events.append(expired[1_000]!.id, account.id, 'status', { status: 'succeeded' });
    await events.append(kept.id, account.id, 'status', { status: 'succeeded' });

    const report = await sweeper.sweep();

    expect(report).toMatchObject({ purgedJobs: total, purgedAssets: 3 });
    expect(await db().job.findMany({ select: { id: true } })).toEqual([{ id: kept.id }]);
    expect(await db().asset.findMany({ select: { id: true } })).toEqual([{ id: upload!.id }]);
    expect(await db().blob.findMany({ select: { hash: true } })).toEqual([{ hash: shared }]);
    expect(await store.has(orphaned)).toBe(false);
    expect(await store.has(shared)).toBe(true);
    expect(await redis.exists(keys.events(expired[1_000]!.id))).toBe(0);
    expect(await redis.exists(keys.events(kept.id))).toBe(1);
    // The per-account status counts followed the deletions.
    expect(await db().$queryRaw`SELECT status::text, n FROM job_status_counts`).toEqual([{ status: 'succeeded', n: 1 }]);
  }, 60_000);

  // decisions.md: a job that waited in the queue past the queue timeout, or ran past the
  // execution timeout, ends expired. A job handed back after its worker vanished has started once:
  // its run deadline bounds it from then on, waiting or running.
  it('expires a first wait past the queue deadline, and a handed-back job only past its run deadline', async () => {
    const account = await stack.account({ name: 'deadlines' });
    const ago = (ms: number) => new Date(Date.now() - ms);
    const job = (data: { queueDeadlineAt: Date; attempts?: number; runDeadlineAt?: Date; startedAt?: Date }) =>
      db().job.create({ data: { accountId: account.id, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000), ...data } });
    const neverStarted = await job({ queueDeadlineAt: ago(1_000) });
    const handedBack = await job({ queueDeadlineAt: ago(1_000), attempts: 1, startedAt: ago(5_000), runDeadlineAt: new Date(Date.now() + 60_000) });
    const handedBackLate = await job({ queueDeadlineAt: ago(120_000), attempts: 1, startedAt: ago(120_000), runDeadlineAt: ago(60_000) });

    const report = await sweeper.sweep();

    expect(report?.expired).toBe(2);
    const state = async (id: string) => db().job.findUniqueOrThrow({ where: { id }, select: { status: true, error: true } });
    expect(await state(neverStarted.id)).toMatchObject({ status: 'expired', error: { code: 'queue_timeout' } });
    expect(await state(handedBack.id)).toMatchObject({ status: 'queued', error: null });
    expect(await state(handedBackLate.id)).toMatchObject({ status: 'expired', error: { code: 'execution_timeout' } });
  });

  it('puts a job its worker lost back in the queue, without the lost run\'s progress', async () => {
    const account = await stack.account({ name: 'lost-run' });
    const later = new Date(Date.now() + 3_600_000);
    const lost = await db().job.create({
      data: {
        accountId: account.id,
        workflow: {},
        expiresAt: later,
        queueDeadlineAt: later,
        runDeadlineAt: later,
        status: 'running',
        workerId: 'worker-gone',
        attempts: 1,
        startedAt: new Date(Date.now() - 20_000),
        progress: { value: 0.5, nodes_done: 1, nodes_total: 2 },
        updatedAt: new Date(Date.now() - 10_000),
      },
    });

    await sweeper.sweep();

    expect(await db().job.findUniqueOrThrow({ where: { id: lost.id }, select: { status: true, progress: true, workerId: true } })).toEqual({ status: 'queued', progress: null, workerId: null });
  });

  it('expires a burst of late first waits several batches deep in one pass', async () => {
    const account = await stack.account({ name: 'late-burst' });
    const total = 640;
    await db().job.createMany({
      data: Array.from({ length: total }, () => ({ accountId: account.id, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000), queueDeadlineAt: new Date(Date.now() - 1_000) })),
    });

    const report = await sweeper.sweep();

    expect(report?.expired).toBe(total);
    expect(await db().job.count({ where: { accountId: account.id, status: 'expired' } })).toBe(total);
  });

  it('stops taking batches when the pass has spent its time, and the next pass goes on', async () => {
    const hurried = new Sweeper(db(), redis, queue, registry, dispatcher, events, store, keys, {
      creditsPerSecond: 1,
      maxAttempts: 2,
      deadlineGraceMs: 30_000,
      passBudgetMs: 0,
    });
    const account = await stack.account({ name: 'late-burst-hurried' });
    await db().job.createMany({
      data: Array.from({ length: 640 }, () => ({ accountId: account.id, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000), queueDeadlineAt: new Date(Date.now() - 1_000) })),
    });

    expect((await hurried.sweep())?.expired).toBe(500);
    expect((await hurried.sweep())?.expired).toBe(140);
    expect(await db().job.count({ where: { accountId: account.id, status: 'expired' } })).toBe(640);
  });

  // Every replica sweeps every few seconds: finding the late jobs must cost the same whatever
  // the backlog of jobs still within their deadlines.
  it('finds late jobs without reading the backlog, on a cached generic plan too', async () => {
    const account = await stack.account({ name: 'deadline-backlog' });
    const later = new Date(Date.now() + 3_600_000);
    await db().job.createMany({ data: Array.from({ length: 10_000 }, () => ({ accountId: account.id, workflow: {}, expiresAt: later, queueDeadlineAt: later })) });
    await db().job.createMany({ data: Array.from({ length: 300 }, () => ({ accountId: account.id, workflow: {}, expiresAt: later, queueDeadlineAt: later, attempts: 1, startedAt: new Date(), runDeadlineAt: later })) });
    await db().$executeRawUnsafe('ANALYZE jobs');
    const query = lateJobsQuery(new Date(), new Date(), 500);
    const buffersRead = (plan: unknown): number => {
      const root = (plan as [{ Plan: Record<string, number> }])[0].Plan;
      return root['Shared Hit Blocks']! + root['Shared Read Blocks']!;
    };

    const [custom] = await db().$queryRaw<{ 'QUERY PLAN': unknown }[]>(Prisma.sql`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${query}`);
    const generic = await db().$transaction(async (tx) => {
      await tx.$executeRawUnsafe('SET LOCAL plan_cache_mode = force_generic_plan');
      await tx.$executeRawUnsafe(`PREPARE late_jobs AS ${query.text}`);
      // EXECUTE takes no bind parameters: the values go in as literals.
      const args = query.values.map((v) => (v instanceof Date ? `'${v.toISOString()}'` : String(v))).join(', ');
      const [row] = await tx.$queryRawUnsafe<{ 'QUERY PLAN': unknown }[]>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE late_jobs(${args})`);
      await tx.$executeRawUnsafe('DEALLOCATE late_jobs');
      return row!;
    });

    // The backlog spans hundreds of pages; finding that no job is late takes a few index pages.
    expect(buffersRead(custom!['QUERY PLAN'])).toBeLessThan(20);
    expect(buffersRead(generic['QUERY PLAN'])).toBeLessThan(20);
    await db().job.deleteMany({ where: { accountId: account.id } });
  });

  it('hands no worker a job past its queue deadline: the next one goes out instead', async () => {
    const account = await stack.account({ name: 'dispatch' });
    await db().job.deleteMany({ where: { status: { in: ['queued', 'running'] } } });
    const job = (queueDeadlineAt: Date, createdAt: Date) =>
      db().job.create({ data: { accountId: account.id, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000), queueDeadlineAt, createdAt } });
    const late = await job(new Date(Date.now() - 1_000), new Date(Date.now() - 10_000));
    const fresh = await job(new Date(Date.now() + 60_000), new Date(Date.now() - 5_000));
    await registry.report({ id: 'w-dispatch', state: 'idle', jobId: null, engineReady: true });
    try {
      expect(await dispatcher.pass()).toBe(1);
      const handed = await db().job.findMany({ where: { accountId: account.id, dispatchedAt: { not: null } }, select: { id: true } });
      expect(handed).toEqual([{ id: fresh.id }]);
      expect((await db().job.findUniqueOrThrow({ where: { id: late.id } })).dispatchedAt).toBeNull();
    } finally {
      await registry.remove('w-dispatch');
    }
  });
  it('hands out as many jobs as ready workers less the runs BullMQ holds, read where the lock is taken', async () => {
    const account = await stack.account({ name: 'slots', tier: 'enterprise' });
    await db().job.deleteMany({ where: { status: { in: ['queued', 'running'] } } });
    await queue.obliterate({ force: true });
    await db().job.createMany({ data: Array.from({ length: 5 }, () => ({ accountId: account.id, workflow: {}, expiresAt: new Date(Date.now() + 3_600_000) })) });
    const handedOut = () => db().job.count({ where: { accountId: account.id, dispatchedAt: { not: null } } });
    // Ready: idle or busy, engine answering, heard from within 5 s. Not: starting, stopping, an
    // engine away, silent for 6 s, or a report that does not parse.
    const ready = ['w-idle', 'w-busy'];
    await registry.report({ id: 'w-idle', state: 'idle', jobId: null, engineReady: true });
    await registry.report({ id: 'w-busy', state: 'busy', jobId: null, engineReady: true });
    await registry.report({ id: 'w-starting', state: 'starting', jobId: null, engineReady: true });
    await registry.report({ id: 'w-stopping', state: 'stopping', jobId: null, engineReady: true });
    await registry.report({ id: 'w-no-engine', state: 'idle', jobId: null, engineReady: false });
    await redis.hset(keys.workers, 'w-silent', JSON.stringify({ id: 'w-silent', state: 'idle', jobId: null, engineReady: true, at: Date.now() - 6_000 }));
    await redis.hset(keys.workers, 'w-garbled', '{"state": "idle", ');
    // A run BullMQ already holds takes one of the two.
    await queue.add('run', { jobId: crypto.randomUUID(), accountId: account.id }, { jobId: 'held-run' });
    try {
      await dispatcher.kick();
      expect(await handedOut()).toBe(ready.length - 1);
      expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 2 });
      // Both slots are now taken: another kick hands out nothing.
      await dispatcher.kick();
      expect(await dispatcher.pass()).toBe(0);
      expect(await handedOut()).toBe(1);
      // A third ready worker frees one slot.
      await registry.report({ id: 'w-third', state: 'busy', jobId: 'x', engineReady: true });
      await dispatcher.kick();
      expect(await handedOut()).toBe(2);
    } finally {
      await redis.del(keys.workers);
      await queue.obliterate({ force: true });
      await db().job.deleteMany({ where: { accountId: account.id } });
    }
  });

  // Retention deletes a blob once no asset references it: the row, then the bytes. An upload of
  // the very same bytes can land in between: its own copy of the bytes written just before they
  // are deleted, its record made just after. It must find out, not keep an asset with no bytes.
  it('an upload of bytes being deleted records them anew and learns its bytes are gone', async () => {
    const account = await stack.account({ name: 'race' });
    const bytes = Buffer.from(`raced bytes ${crypto.randomUUID()}`);
    const first = await recordUploadedAsset(db(), await store.put(Readable.from([bytes])), { accountId: account.id, filePath: 'a.bin', contentType: 'application/octet-stream' });
    // The deletion stops between the row and the bytes, as a slow storage call would.
    let reached!: () => void;
    let release!: () => void;
    const atBytes = new Promise<void>((r) => (reached = r));
    const mayGo = new Promise<void>((r) => (release = r));
    const pausing = withDelete(async (hash) => {
      reached();
      await mayGo;
      return store.delete(hash);
    });
    const deletion = deleteAssetsAndOrphanBlobs(db(), pausing, [first.id]);
    await atBytes;
    // The upload: its bytes written (they exist already), then recorded, then checked.
    const again = await store.put(Readable.from([bytes]));
    const upload = (async () => {
      const asset = await recordUploadedAsset(db(), again, { accountId: account.id, filePath: 'b.bin', contentType: 'application/octet-stream' });
      return { asset, survived: await blobSurvived(db(), store, again.hash) };
    })();
    await new Promise((r) => setTimeout(r, 200));
    release();
    await deletion;
    const { asset, survived } = await upload;
    expect(survived).toBe(false);
    // The record itself is whole: the blob row was made anew for it.
    expect(await db().blob.findUnique({ where: { hash: asset.blobHash }, select: { hash: true } })).toEqual({ hash: again.hash });
    // Without the race the same check passes.
    await store.put(Readable.from([bytes]));
    expect(await blobSurvived(db(), store, again.hash)).toBe(true);
  });
  it('keeps the assets of a blob whose bytes could not be deleted, so a later pass deletes them', async () => {
    const account = await stack.account({ name: 'stuck' });
    const stored = await store.put(Readable.from([Buffer.from(`undeletable for now ${crypto.randomUUID()}`)]));
    const asset = await recordUploadedAsset(db(), stored, { accountId: account.id, filePath: 'stuck.bin', contentType: 'application/octet-stream' });
    const refusing = withDelete(() => Promise.reject(new Error('store unavailable')));
    await expect(deleteAssetsAndOrphanBlobs(db(), refusing, [asset.id])).rejects.toThrow('store unavailable');
    expect(await db().asset.findUnique({ where: { id: asset.id }, select: { id: true } })).toEqual({ id: asset.id });
    expect(await db().blob.findUnique({ where: { hash: stored.hash }, select: { hash: true } })).toEqual({ hash: stored.hash });
    expect(await store.has(stored.hash)).toBe(true);
    // The store is back: the next attempt deletes all of it.
    expect(await deleteAssetsAndOrphanBlobs(db(), store, [asset.id])).toBe(1);
    expect(await db().blob.findUnique({ where: { hash: stored.hash } })).toBeNull();
    expect(await store.has(stored.hash)).toBe(false);
  });

  // A retention shorter than a job's deadlines must not delete it while it runs: it would never be
  // charged, and a client following its events would wait for an ending that never comes.
  it('keeps a job past its retention while it is queued or running; it goes once it has ended', async () => {
    const account = await stack.account({ name: 'long-runner' });
    const past = new Date(Date.now() - 1_000);
    const running = await db().job.create({ data: { accountId: account.id, workflow: {}, status: 'running', startedAt: new Date(), expiresAt: past } });
    const queued = await db().job.create({ data: { accountId: account.id, workflow: {}, status: 'queued', expiresAt: past } });
    expect(await sweeper.sweep()).toMatchObject({ purgedJobs: 0 });
    expect(await db().job.count({ where: { id: { in: [running.id, queued.id] } } })).toBe(2);
    await db().job.update({ where: { id: running.id }, data: { status: 'succeeded', completedAt: new Date() } });
    expect(await sweeper.sweep()).toMatchObject({ purgedJobs: 1 });
    expect(await db().job.findUnique({ where: { id: running.id } })).toBeNull();
    expect(await db().job.findUnique({ where: { id: queued.id } })).not.toBeNull();
    await db().job.delete({ where: { id: queued.id } });
  });
});
