import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Db } from '#libs/db';
import { storeOf, type JobStore } from './job-store.js';
import type { JobKeys } from './keys.js';
import { runJobId, type RunPayload } from './run-queue.js';
import type { WorkerRegistry } from './worker-registry.js';

const LOCK_MS = 10_000;
// Passes one kick may run back to back; a kick still pending after them stays marked for the next.
const MAX_PASSES = 20;

/** KEYS: lock, dirty. ARGV: token, ms. 1: lock taken (dirty cleared); 0: held elsewhere, marked dirty. */
const TAKE_OR_MARK = `
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  redis.call('DEL', KEYS[2])
  return 1
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return 0`;

/** KEYS: lock, dirty. ARGV: token, ms. 1: kicked meanwhile, lock kept for another pass; 0: released. */
const AGAIN_OR_RELEASE = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
redis.call('DEL', KEYS[1])
return 0`;

/** KEYS: lock. ARGV: token. Releases the lock if it is still ours. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

type LockCommands = {
  dispatchTakeOrMark(lock: string, dirty: string, token: string, ms: number): Promise<number>;
  dispatchAgainOrRelease(lock: string, dirty: string, token: string, ms: number): Promise<number>;
  dispatchRelease(lock: string, token: string): Promise<number>;
};

/**
 * Fair scheduling on top of BullMQ, which has no per-tenant fairness of its own.
 *
 * Jobs wait in PostgreSQL. The dispatcher hands BullMQ only as many jobs as there are idle
 * workers, chosen round-robin across accounts: an account's k-th waiting job ranks k plus the
 * jobs it already runs, ties going to the account served least recently. So a burst of a thousand
 * jobs from one account interleaves with everyone else's first job instead of standing in front
 * of it. An account never gets more jobs handed out than its concurrency allows.
 *
 * Any process may call `kick()`; one pass runs at a time across all processes (a Redis lock), and
 * a kick that arrives during a pass makes the holder run another pass.
 */
export class Dispatcher {
  private readonly jobs: JobStore;

  constructor(
    jobs: JobStore | Db,
    private readonly redis: Redis,
    private readonly queue: Queue<RunPayload>,
    private readonly registry: WorkerRegistry,
    private readonly keys: JobKeys,
  ) {
    this.jobs = storeOf(jobs);
    // Sent by hash (EVALSHA) once Redis knows them; several dispatchers may share a connection.
    if (!(redis as Redis & Partial<LockCommands>).dispatchTakeOrMark) {
      redis.defineCommand('dispatchTakeOrMark', { numberOfKeys: 2, lua: TAKE_OR_MARK });
      redis.defineCommand('dispatchAgainOrRelease', { numberOfKeys: 2, lua: AGAIN_OR_RELEASE });
      redis.defineCommand('dispatchRelease', { numberOfKeys: 1, lua: RELEASE });
    }
  }

  private get lock(): LockCommands {
    return this.redis as unknown as LockCommands;
  }

  async kick(): Promise<void> {
    const token = `${process.pid}.${Math.random()}`;
    // Take the lock, or (one atomic step) tell its holder to run another pass.
    const locked = await this.lock.dispatchTakeOrMark(this.keys.dispatchLock, this.keys.dispatchDirty, token, LOCK_MS);
    if (Number(locked) === 1) await this.runPasses(token);
  }

  private async runPasses(token: string): Promise<void> {
    let held = true;
    try {
      for (let i = 0; i < MAX_PASSES && held; i++) {
        await this.pass();
        // Another pass if kicked meanwhile, else the lock goes: one atomic step, so no kick is lost.
        held = Number(await this.lock.dispatchAgainOrRelease(this.keys.dispatchLock, this.keys.dispatchDirty, token, LOCK_MS)) === 1;
      }
    } finally {
      // Release only our own lock.
      if (held) await this.lock.dispatchRelease(this.keys.dispatchLock, token);
    }
  }

  /**
   * Hands out at most as many jobs as there are free workers: ready workers minus the runs
   * BullMQ holds (taken or waiting). BullMQ's own counts are exact where a worker's reported
   * state can lag behind.
   */
  async pass(): Promise<number> {
    const [ready, counts] = await Promise.all([this.registry.readyCount(), this.queue.getJobCounts('active', 'waiting', 'prioritized')]);
    const capacity = ready - (counts.active ?? 0) - (counts.waiting ?? 0) - (counts.prioritized ?? 0);
    if (capacity <= 0) return 0;
    const now = new Date();
    const claimed = await this.jobs.handOut(capacity, now);
    if (claimed.length === 0) return 0;
    // In the chosen order, in one round trip. A claim whose run never reaches BullMQ (Redis gone
    // just now) is found by the sweeper and handed out again.
    await this.queue.addBulk(claimed.map((row) => ({ name: 'run', data: { jobId: row.id, accountId: row.account_id }, opts: { jobId: runJobId(row.id, now) } })));
    return claimed.length;
  }
}

