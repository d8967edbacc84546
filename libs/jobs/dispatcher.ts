import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { PLAN_PER_CALL, Prisma, type Db } from '#libs/db';
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
  constructor(
    private readonly db: Db,
    private readonly redis: Redis,
    private readonly queue: Queue<RunPayload>,
    private readonly registry: WorkerRegistry,
    private readonly keys: JobKeys,
  ) {
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
    // Only accounts with waiting jobs, and only their first few jobs, are read (partial indexes
    // jobs_waiting_idx and jobs_handed_out_idx): the cost of a pass does not grow with the backlog.
    // The chosen jobs are claimed and their accounts marked served in the same statement: one
    // round trip and one commit per pass, whatever the number of jobs.
    const claimed = await this.db.$queryRaw<{ id: string; account_id: string }[]>`
      WITH RECURSIVE waiting_accounts AS (
        (SELECT account_id FROM jobs WHERE status = 'queued' AND dispatched_at IS NULL ORDER BY account_id LIMIT 1)
        UNION ALL
        SELECT (SELECT j.account_id FROM jobs j
                WHERE j.status = 'queued' AND j.dispatched_at IS NULL AND j.account_id > w.account_id
                ORDER BY j.account_id LIMIT 1)
        FROM waiting_accounts w WHERE w.account_id IS NOT NULL
      ), candidates AS (
        SELECT a.id, a.last_dispatched_at, a.max_concurrent_jobs,
               (SELECT count(*) FROM jobs b
                WHERE b.account_id = a.id
                  AND (b.status IN ('running', 'canceling') OR (b.status = 'queued' AND b.dispatched_at IS NOT NULL)))::int AS busy
        FROM waiting_accounts w JOIN accounts a ON a.id = w.account_id
        WHERE a.status = 'active'
      ), picked AS (
        SELECT j.id, c.id AS account_id,
               row_number() OVER (ORDER BY j.rank + c.busy, c.last_dispatched_at ASC NULLS FIRST, j.created_at, j.id) AS turn
        FROM candidates c
        CROSS JOIN LATERAL (
          SELECT id, created_at, row_number() OVER (ORDER BY created_at, id)::int AS rank
          FROM (SELECT id, created_at FROM jobs
                WHERE account_id = c.id AND status = 'queued' AND dispatched_at IS NULL
                  -- Past its queue deadline a job is no worker's: the sweeper expires it.
                  AND (attempts > 0 OR queue_deadline_at IS NULL OR queue_deadline_at > ${now})
                ORDER BY created_at, id
                LIMIT greatest(0, least(${capacity}, c.max_concurrent_jobs - c.busy))) firsts
        ) j
        ORDER BY turn
        LIMIT ${capacity}
      ), claimed AS (
        UPDATE jobs SET dispatched_at = ${now}
        FROM picked WHERE jobs.id = picked.id AND jobs.status = 'queued' AND jobs.dispatched_at IS NULL
        RETURNING jobs.id, jobs.account_id, picked.turn
      ), served AS (
        UPDATE accounts SET last_dispatched_at = ${now} WHERE id IN (SELECT account_id FROM claimed)
      )
      SELECT id, account_id FROM claimed ORDER BY turn`;
    if (claimed.length === 0) return 0;
    // In the chosen order, in one round trip. A claim whose run never reaches BullMQ (Redis gone
    // just now) is found by the sweeper and handed out again.
    await this.queue.addBulk(claimed.map((row) => ({ name: 'run', data: { jobId: row.id, accountId: row.account_id }, opts: { jobId: runJobId(row.id, now) } })));
    return claimed.length;
  }
}

/**
 * Positions of waiting jobs in the order they will start (0 = next): jobs already handed to the
 * run queue first, then the dispatcher's fair order.
 */
export async function queuePositions(db: Db): Promise<Map<string, number>> {
  const rows = await db.$queryRaw<{ id: string; pos: number }[]>`
    WITH busy AS (
      SELECT account_id, count(*)::int AS n FROM jobs WHERE status IN ('running', 'canceling') GROUP BY account_id
    ), waiting AS (
      SELECT id, account_id, created_at, dispatched_at,
             row_number() OVER (PARTITION BY account_id ORDER BY (dispatched_at IS NULL), created_at, id)::int AS rank
      FROM jobs WHERE status = 'queued'
    )
    SELECT w.id, (row_number() OVER (
             ORDER BY (w.dispatched_at IS NULL), w.dispatched_at,
                      -- the fair order applies to waiting jobs; handed-out ones go oldest first
                      CASE WHEN w.dispatched_at IS NULL THEN w.rank + coalesce(b.n, 0) END,
                      CASE WHEN w.dispatched_at IS NULL THEN a.last_dispatched_at END ASC NULLS FIRST,
                      w.created_at, w.id) - 1)::int AS pos
    FROM waiting w JOIN accounts a ON a.id = w.account_id LEFT JOIN busy b ON b.account_id = w.account_id`;
  return new Map(rows.map((r) => [r.id, r.pos]));
}

/**
 * Positions of some waiting jobs without ranking the whole queue. Used for jobs newer than the
 * last full ranking (fresh submissions); agrees with `queuePositions` job by job.
 *
 * A waiting job with rank r in its account (r - 1 older waiting jobs there) and key k = r plus
 * the jobs its account already has handed out, stands behind: every handed-out job; its r - 1
 * elders; and from each other account X with b handed out, the first k - b - 1 waiting jobs, plus
 * X's job with the same key if X was served before (or at the same moment, and that job is older).
 * The per-account counts come from job_queue_counts, which triggers keep exact in the same
 * transactions that change the jobs, so no part of this reads the backlog: a job's rank is its
 * account's count less the (few, for a fresh job) newer ones. A job already handed to a worker
 * stands among the handed-out ones, in the order they went out.
 */
export async function queuePositionsOf(db: Db, jobIds: string[]): Promise<Map<string, number>> {
  if (jobIds.length === 0) return new Map();
  // Planned per call. A plan cached while the table was small reads every queued job: the count
  // of handed-out jobs goes through the status index, and so may the lookup of the wanted ids
  // (checked with plan_cache_mode = force_generic_plan; planned per call they use
  // jobs_handed_out_idx and the primary key).
  const rows = await db.$queryRaw<{ id: string; pos: number }[]>`
    ${Prisma.raw(PLAN_PER_CALL)}
    WITH wanted AS MATERIALIZED (
      -- One primary-key probe per id, the status checked after it. Unfenced, the planner ANDs
      -- the ids with the status index on stale statistics, reading every queued job.
      SELECT j.id, j.account_id, j.created_at, j.dispatched_at
      FROM unnest(${jobIds}::uuid[]) AS want(id)
      CROSS JOIN LATERAL (SELECT id, account_id, created_at, dispatched_at, status FROM jobs
                          WHERE jobs.id = want.id OFFSET 0) j
      WHERE j.status = 'queued'
    ), counts AS MATERIALIZED (
      -- As the dispatcher counts it, a job handed over but not started holds a slot (b) too.
      SELECT c.account_id, c.waiting AS q, c.handed + c.running AS b, c.handed, a.last_dispatched_at
      FROM job_queue_counts c JOIN accounts a ON a.id = c.account_id
      WHERE c.waiting > 0 OR c.handed > 0
    ), mine AS MATERIALIZED (
      SELECT w.id, w.account_id, w.created_at, r.rank, r.rank + c.b AS key, c.last_dispatched_at AS my_last
      FROM wanted w
      JOIN counts c ON c.account_id = w.account_id
      -- OFFSET 0: counted once per job, not once for each use of rank below.
      CROSS JOIN LATERAL (
        SELECT c.q - (SELECT count(*) FROM jobs n
                      WHERE n.account_id = w.account_id AND n.status = 'queued' AND n.dispatched_at IS NULL
                        AND (n.created_at, n.id) > (w.created_at, w.id))::int AS rank
        OFFSET 0
      ) r
      WHERE w.dispatched_at IS NULL
    )
    SELECT mine.id,
           ((SELECT sum(handed) FROM counts)
            + (mine.rank - 1)
            + coalesce((
                SELECT sum(
                  greatest(0, least(x.q, mine.key - x.b - 1))
                  + CASE WHEN mine.key - x.b BETWEEN 1 AND x.q THEN
                      CASE WHEN (x.last_dispatched_at IS NULL AND mine.my_last IS NOT NULL) OR x.last_dispatched_at < mine.my_last THEN 1
                           -- Served at the same moment: the older of the two jobs with this key goes
                           -- first. Only then is X's job with that key looked up.
                           WHEN x.last_dispatched_at IS NOT DISTINCT FROM mine.my_last THEN
                             coalesce((SELECT CASE WHEN (o.created_at, o.id) < (mine.created_at, mine.id) THEN 1 ELSE 0 END
                                       FROM jobs o
                                       WHERE o.account_id = x.account_id AND o.status = 'queued' AND o.dispatched_at IS NULL
                                       ORDER BY o.created_at, o.id
                                       OFFSET mine.key - x.b - 1 LIMIT 1), 0)
                           ELSE 0 END
                    ELSE 0 END)
                FROM counts x
                WHERE x.account_id <> mine.account_id AND x.q > 0), 0))::int AS pos
    FROM mine
    UNION ALL
    SELECT w.id, (SELECT count(*) FROM jobs d
                  WHERE d.status = 'queued' AND d.dispatched_at IS NOT NULL
                    AND (d.dispatched_at, d.created_at, d.id) < (w.dispatched_at, w.created_at, w.id))::int AS pos
    FROM wanted w WHERE w.dispatched_at IS NOT NULL`;
  return new Map(rows.map((r) => [r.id, r.pos]));
}
