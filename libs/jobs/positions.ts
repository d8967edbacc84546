import { PLAN_PER_CALL, Prisma, queryRows, type Db } from '#libs/db';

// The queue positions JobStore answers with: statements of their own, for their size.

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
  // Straight on the pool (queryRows): every submission's answer waits for this count.
  const rows = await queryRows<{ id: string; pos: number }>(db, Prisma.sql`
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
    FROM wanted w WHERE w.dispatched_at IS NOT NULL`);
  return new Map(rows.map((r) => [r.id, r.pos]));
}
