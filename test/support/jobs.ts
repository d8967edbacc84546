import { Redis } from 'ioredis';
import type { Job } from '#libs/db';
import { Dispatcher, ExtraDataVault, WorkerRegistry, createRunQueue, jobKeys, type RunPayload } from '#libs/jobs';
import type { Queue } from 'bullmq';
import { TEST_REDIS_URL, TEST_SIGNING_SECRET } from './env.js';
import type { TestStack } from './stack.js';

/** Places jobs the way the API does (a row, then a dispatcher kick) and watches them. */
export class JobsProbe {
  readonly redis: Redis;
  readonly queue: Queue<RunPayload>;
  readonly dispatcher: Dispatcher;
  readonly registry: WorkerRegistry;
  readonly keys;

  constructor(private readonly stack: TestStack) {
    this.keys = jobKeys(stack.redisPrefix);
    this.redis = new Redis(TEST_REDIS_URL);
    this.queue = createRunQueue({ url: TEST_REDIS_URL, maxRetriesPerRequest: null } as never, this.keys);
    this.registry = new WorkerRegistry(this.redis, this.keys);
    this.dispatcher = new Dispatcher(stack.db, this.redis, this.queue, this.keys);
  }

  async place(accountId: string, workflow: object, extraData?: Record<string, unknown>): Promise<string> {
    const job = await this.stack.db.job.create({
      data: { accountId, workflow, expiresAt: new Date(Date.now() + 3600_000), queueDeadlineAt: new Date(Date.now() + 600_000) },
    });
    if (extraData) await new ExtraDataVault(this.redis, this.keys, TEST_SIGNING_SECRET).put(job.id, extraData, 600);
    await this.dispatcher.kick();
    return job.id;
  }

  async waitFor(jobId: string, statuses: string[], timeoutMs = 30_000): Promise<Job> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.stack.db.job.findUniqueOrThrow({ where: { id: jobId } });
      if (statuses.includes(job.status)) return job;
      if (Date.now() > until) throw new Error(`job ${jobId} is ${job.status}, expected ${statuses.join('|')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async cancel(jobId: string): Promise<void> {
    await this.stack.db.job.updateMany({ where: { id: jobId, status: 'running' }, data: { status: 'canceling' } });
    await this.redis.set(this.keys.cancelFlag(jobId), 'cancel', 'EX', 600);
    await this.redis.publish(this.keys.cancelChannel, jobId);
  }

  async close(): Promise<void> {
    await this.queue.close();
    this.redis.disconnect();
  }
}

export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
