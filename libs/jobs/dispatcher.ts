import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Db } from '#libs/db';
import { storeOf, type JobStore } from './job-store.js';
import type { JobKeys } from './keys.js';
import { runJobId, type RunPayload } from './run-queue.js';
import { READY_WORKERS_LUA } from './worker-registry.js';

const LOCK_MS = 10_000;
// Passes one kick may run back to back; a kick still pending after them stays marked for the next.
const MAX_PASSES = 20;

/**
 * How many more runs BullMQ can be given: ready workers (see READY_WORKERS_LUA) minus the runs it
 * holds, taken or waiting. Read where the lock is taken, so a pass costs no round trip for it.
 * KEYS (from the 3rd): workers, BullMQ's active, wait and prioritized. ARGV[3]: now, ms.
 */
const FREE_SLOTS = `${READY_WORKERS_LUA}
local function freeSlots()
  return readyWorkers(KEYS[3], tonumber(ARGV[3])) - redis.call('LLEN', KEYS[4]) - redis.call('LLEN', KEYS[5]) - redis.call('ZCARD', KEYS[6])
end`;

/** KEYS: lock, dirty, then FREE_SLOTS's. ARGV: token, ms, now. {1, free slots}: lock taken (dirty cleared); {0}: held elsewhere, marked dirty. */
const TAKE_OR_MARK = `${FREE_SLOTS}
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  redis.call('DEL', KEYS[2])
  return {1, freeSlots()}
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return {0}`;

/** KEYS: lock, dirty, then FREE_SLOTS's. ARGV: token, ms, now. {1, free slots}: kicked meanwhile, lock kept for another pass; {0}: released. */
const AGAIN_OR_RELEASE = `${FREE_SLOTS}
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, freeSlots()}
end
redis.call('DEL', KEYS[1])
return {0}`;

/** KEYS: lock, dirty, then FREE_SLOTS's. ARGV: unused, unused, now. The free slots alone. */
const FREE = `${FREE_SLOTS}
return freeSlots()`;

/** KEYS: lock. ARGV: token. Releases the lock if it is still ours. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

type Keys = [lock: string, dirty: string, workers: string, active: string, wait: string, prioritized: string];
type LockCommands = {
  dispatchTakeOrMark(...args: [...Keys, token: string, ms: number, now: number]): Promise<[number, number?]>;
  dispatchAgainOrRelease(...args: [...Keys, token: string, ms: number, now: number]): Promise<[number, number?]>;
  dispatchFree(...args: [...Keys, token: string, ms: number, now: number]): Promise<number>;
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
  private readonly scriptKeys: Keys;

  constructor(
    jobs: JobStore | Db,
    private readonly redis: Redis,
    private readonly queue: Queue<RunPayload>,
    private readonly keys: JobKeys,
  ) {
    this.jobs = storeOf(jobs);
    // Sent by hash (EVALSHA) once Redis knows them; several dispatchers may share a connection.
    if (!(redis as Redis & Partial<LockCommands>).dispatchTakeOrMark) {
      redis.defineCommand('dispatchTakeOrMark', { numberOfKeys: 6, lua: TAKE_OR_MARK });
      redis.defineCommand('dispatchAgainOrRelease', { numberOfKeys: 6, lua: AGAIN_OR_RELEASE });
      redis.defineCommand('dispatchFree', { numberOfKeys: 6, lua: FREE });
      redis.defineCommand('dispatchRelease', { numberOfKeys: 1, lua: RELEASE });
    }
    const bull = queue.keys;
    this.scriptKeys = [keys.dispatchLock, keys.dispatchDirty, keys.workers, bull.active!, bull.wait!, bull.prioritized!];
  }

  private get lock(): LockCommands {
    return this.redis as unknown as LockCommands;
  }

  async kick(): Promise<void> {
    const token = `${process.pid}.${Math.random()}`;
    // Take the lock, or (one atomic step) tell its holder to run another pass.
    const [locked, free] = await this.lock.dispatchTakeOrMark(...this.scriptKeys, token, LOCK_MS, Date.now());
    if (Number(locked) === 1) await this.runPasses(token, Number(free));
  }

  private async runPasses(token: string, free: number): Promise<void> {
    let held = true;
    try {
      for (let i = 0; i < MAX_PASSES && held; i++) {
        await this.pass(free);
        // Another pass if kicked meanwhile, else the lock goes: one atomic step, so no kick is lost.
        const [again, freeNow] = await this.lock.dispatchAgainOrRelease(...this.scriptKeys, token, LOCK_MS, Date.now());
        held = Number(again) === 1;
        free = Number(freeNow);
      }
    } finally {
      // Release only our own lock.
      if (held) await this.lock.dispatchRelease(this.keys.dispatchLock, token);
    }
  }

  /**
   * Hands out at most as many jobs as there are free workers: ready workers minus the runs
   * BullMQ holds (taken or waiting), `free` as the lock's script read them, else read now.
   * BullMQ's own counts are exact where a worker's reported state can lag behind.
   */
  async pass(free?: number): Promise<number> {
    const capacity = free ?? Number(await this.lock.dispatchFree(...this.scriptKeys, '', 0, Date.now()));
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

