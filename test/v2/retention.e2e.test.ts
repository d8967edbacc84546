import { Readable } from 'node:stream';
import { Redis } from 'ioredis';
import { createAssetRecord, recordBlob } from '#libs/assets';
import { loadConfig } from '#libs/config';
import { createRunQueue, Dispatcher, JobEventLog, jobKeys, Sweeper, WorkerRegistry } from '#libs/jobs';
import { createBlobStore } from '#libs/storage';
import { TestStack } from '../support/stack.js';

// Retention must keep pace with submissions: a pass that deleted a fixed handful of jobs would
// fall behind for good at a few hundred jobs a second, and the tables would grow without end.
describe('retention sweep', () => {
  const stack = new TestStack('s3');
  let redis: Redis;

  beforeAll(async () => {
    await stack.open();
    redis = new Redis(stack.services.redisUrl);
  });
  afterAll(async () => {
    redis.disconnect();
    await stack.close();
  });

  it('deletes a backlog of expired jobs several batches deep in one pass, with their outputs and orphaned blobs', async () => {
    const config = loadConfig(stack.env());
    const store = createBlobStore(config);
    const keys = jobKeys(stack.redisPrefix);
    const queue = createRunQueue({ url: stack.services.redisUrl } as never, keys);
    const registry = new WorkerRegistry(redis, keys);
    const events = new JobEventLog(redis, keys, 60_000);
    const sweeper = new Sweeper(db(), redis, queue, registry, new Dispatcher(db(), redis, queue, registry, keys), events, store, keys, {
      creditsPerSecond: 1,
      maxAttempts: 2,
      deadlineGraceMs: 30_000,
    });
    try {
      const account = await stack.account({ name: 'retained' });
      const past = new Date(Date.now() - 1_000);
      const total = 1_234;
      await db().job.createMany({
        data: Array.from({ length: total }, () => ({ accountId: account.id, workflow: {}, status: 'succeeded' as const, expiresAt: past })),
      });
      const kept = await db().job.create({ data: { accountId: account.id, workflow: {}, status: 'succeeded', expiresAt: new Date(Date.now() + 3_600_000) } });
      const expired = await db().job.findMany({ where: { expiresAt: past }, select: { id: true }, orderBy: { id: 'asc' } });

      // Outputs of expired jobs: one blob only they use, one also held by a live upload.
      const put = async (text: string) => {
        const blob = await store.put(Readable.from([Buffer.from(text)]));
        await recordBlob(db(), blob);
        return blob.hash;
      };
      const orphaned = await put('only expired outputs use this');
      const shared = await put('a live upload uses this too');
      for (const [i, hash] of [orphaned, orphaned, shared].entries()) {
        await createAssetRecord(db(), { accountId: account.id, blobHash: hash, filePath: `out/${i}.png`, contentType: 'image/png', jobId: expired[i * 500]!.id, expiresAt: past });
      }
      const upload = await createAssetRecord(db(), { accountId: account.id, blobHash: shared, filePath: 'in/live.png', contentType: 'image/png' });
      await events.append(expired[1_000]!.id, account.id, 'status', { status: 'succeeded' });
      await events.append(kept.id, account.id, 'status', { status: 'succeeded' });

      const report = await sweeper.sweep();

      expect(report).toMatchObject({ purgedJobs: total, purgedAssets: 3 });
      expect(await db().job.findMany({ select: { id: true } })).toEqual([{ id: kept.id }]);
      expect(await db().asset.findMany({ select: { id: true } })).toEqual([{ id: upload.id }]);
      expect(await db().blob.findMany({ select: { hash: true } })).toEqual([{ hash: shared }]);
      expect(await store.has(orphaned)).toBe(false);
      expect(await store.has(shared)).toBe(true);
      expect(await redis.exists(keys.events(expired[1_000]!.id))).toBe(0);
      expect(await redis.exists(keys.events(kept.id))).toBe(1);
      // The per-account status counts followed the deletions.
      expect(await db().$queryRaw`SELECT status::text, n FROM job_status_counts`).toEqual([{ status: 'succeeded', n: 1 }]);
    } finally {
      await queue.close();
    }
  }, 60_000);

  const db = () => stack.db;
});
