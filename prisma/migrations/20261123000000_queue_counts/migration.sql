-- Per-account counts of the jobs in each stage of the queue, kept exact by triggers on "jobs".
-- The queue position of a fresh job needs, for every account with work, how many of its jobs
-- wait and how many are handed out or running. Counting them from "jobs" read the whole backlog
-- for every batch of submissions; these rows are read instead. The triggers fire once per
-- statement and write one row per account the statement changed, however many jobs it touched.
--
-- waiting: queued, not yet handed out; handed: queued and handed to the run queue; running:
-- running or canceling. Only accounts with jobs in one of these stages keep a row (an insert
-- batch that added nothing can leave one at zero; the sweeper removes those), so reading the
-- table costs about as many rows as there are accounts with work. There is no foreign key to
-- accounts: deleting an account cascades to its jobs, and PostgreSQL does not order the two
-- cascades, so a job trigger could otherwise meet an account row already gone.

CREATE TABLE "job_queue_counts" (
    "account_id" UUID NOT NULL,
    "waiting" INTEGER NOT NULL DEFAULT 0,
    "handed" INTEGER NOT NULL DEFAULT 0,
    "running" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "job_queue_counts_pkey" PRIMARY KEY ("account_id")
);

CREATE FUNCTION "job_queue_stage"(status "JobStatus", dispatched_at TIMESTAMPTZ) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN status = 'queued' AND dispatched_at IS NULL THEN 'waiting'
              WHEN status = 'queued' THEN 'handed'
              WHEN status IN ('running', 'canceling') THEN 'running' END
$$;

CREATE FUNCTION "job_queue_counts_apply"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  accounts UUID[];
  stages TEXT[];
  deltas INT[];
  emptied UUID[];
BEGIN
  -- A job a statement takes out of a stage counts -1 there; one it puts into a stage, +1.
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(account_id), array_agg(job_queue_stage(status, dispatched_at)), array_agg(1)
      INTO accounts, stages, deltas FROM new_jobs;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(account_id), array_agg(job_queue_stage(status, dispatched_at)), array_agg(-1)
      INTO accounts, stages, deltas FROM old_jobs;
  ELSE
    SELECT array_agg(account_id), array_agg(stage), array_agg(delta) INTO accounts, stages, deltas
    FROM (SELECT account_id, job_queue_stage(status, dispatched_at) AS stage, -1 AS delta FROM old_jobs
          UNION ALL
          SELECT account_id, job_queue_stage(status, dispatched_at), 1 FROM new_jobs) change;
  END IF;
  -- Accounts are locked in id order, so statements touching the same accounts cannot deadlock.
  WITH changed AS (
    INSERT INTO job_queue_counts AS c (account_id, waiting, handed, running)
    SELECT * FROM (
      SELECT account_id,
             coalesce(sum(delta) FILTER (WHERE stage = 'waiting'), 0)::int AS waiting,
             coalesce(sum(delta) FILTER (WHERE stage = 'handed'), 0)::int AS handed,
             coalesce(sum(delta) FILTER (WHERE stage = 'running'), 0)::int AS running
      FROM unnest(accounts, stages, deltas) AS change(account_id, stage, delta)
      WHERE stage IS NOT NULL
      GROUP BY account_id
    ) per_account
    WHERE waiting <> 0 OR handed <> 0 OR running <> 0
    ORDER BY account_id
    ON CONFLICT (account_id) DO UPDATE
      SET waiting = c.waiting + excluded.waiting, handed = c.handed + excluded.handed, running = c.running + excluded.running
    RETURNING account_id, waiting, handed, running
  )
  SELECT array_agg(account_id) FILTER (WHERE waiting = 0 AND handed = 0 AND running = 0) INTO emptied FROM changed;
  -- An account whose last job left the queue drops out. Only rows this statement just wrote,
  -- and so holds locked: deleting any other could wait on a lock out of order.
  IF emptied IS NOT NULL THEN
    DELETE FROM job_queue_counts WHERE account_id = ANY(emptied) AND waiting = 0 AND handed = 0 AND running = 0;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION "job_queue_counts_clear"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM job_queue_counts;
  RETURN NULL;
END $$;

-- Recounts from the jobs themselves, for a database restored or written with triggers disabled
-- (docs/operations.md). Writers of jobs wait until the calling transaction ends, so nothing
-- changes between the recount and the triggers taking over again.
CREATE FUNCTION "job_queue_counts_rebuild"() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
  DELETE FROM job_queue_counts;
  INSERT INTO job_queue_counts (account_id, waiting, handed, running)
  SELECT account_id,
         count(*) FILTER (WHERE job_queue_stage(status, dispatched_at) = 'waiting'),
         count(*) FILTER (WHERE job_queue_stage(status, dispatched_at) = 'handed'),
         count(*) FILTER (WHERE job_queue_stage(status, dispatched_at) = 'running')
  FROM jobs WHERE status IN ('queued', 'running', 'canceling')
  GROUP BY account_id;
END $$;

CREATE TRIGGER "jobs_count_inserted" AFTER INSERT ON "jobs"
  REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_queue_counts_apply();
CREATE TRIGGER "jobs_count_updated" AFTER UPDATE ON "jobs"
  REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_queue_counts_apply();
CREATE TRIGGER "jobs_count_deleted" AFTER DELETE ON "jobs"
  REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_queue_counts_apply();
CREATE TRIGGER "jobs_count_truncated" AFTER TRUNCATE ON "jobs"
  FOR EACH STATEMENT EXECUTE FUNCTION job_queue_counts_clear();

-- This migration runs in one transaction: the triggers and the first count see the same jobs.
SELECT job_queue_counts_rebuild();
