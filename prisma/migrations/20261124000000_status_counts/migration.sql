-- Per-account counts of jobs in each status, kept exact by triggers on "jobs", for the api's
-- jobs_total gauge. Counting "jobs" at every scrape read every retained job (a million took
-- 0.2 s of three workers' time, per replica, every scrape); these rows are as many as the
-- accounts times the statuses they have jobs in.
--
-- Like job_queue_counts: the triggers fire once per statement and write one row per account and
-- status the statement changed; rows are locked in key order, so statements cannot deadlock on
-- them; a row that reaches zero is deleted; there is no foreign key to accounts (deleting an
-- account cascades to its jobs, and the two cascades are not ordered).

CREATE TABLE "job_status_counts" (
    "account_id" UUID NOT NULL,
    "status" "JobStatus" NOT NULL,
    "n" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "job_status_counts_pkey" PRIMARY KEY ("account_id", "status")
);

CREATE FUNCTION "job_status_counts_apply"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  accounts UUID[];
  statuses "JobStatus"[];
  deltas INT[];
  emptied_accounts UUID[];
  emptied_statuses "JobStatus"[];
BEGIN
  -- A job a statement takes out of a status counts -1 there; one it puts into a status, +1.
  -- (A trigger may only name the transition tables its event has, hence three branches.)
  IF TG_OP = 'INSERT' THEN
    SELECT array_agg(account_id), array_agg(status), array_agg(1) INTO accounts, statuses, deltas FROM new_jobs;
  ELSIF TG_OP = 'DELETE' THEN
    SELECT array_agg(account_id), array_agg(status), array_agg(-1) INTO accounts, statuses, deltas FROM old_jobs;
  ELSE
    -- Only jobs whose status changed: progress and log updates write no row.
    SELECT array_agg(account_id), array_agg(status), array_agg(delta) INTO accounts, statuses, deltas
    FROM (SELECT o.account_id, o.status, -1 AS delta FROM old_jobs o JOIN new_jobs n ON n.id = o.id WHERE n.status <> o.status
          UNION ALL
          SELECT n.account_id, n.status, 1 FROM old_jobs o JOIN new_jobs n ON n.id = o.id WHERE n.status <> o.status) change;
  END IF;
  IF accounts IS NULL THEN
    RETURN NULL;
  END IF;
  WITH changed AS (
    INSERT INTO job_status_counts AS c (account_id, status, n)
    SELECT * FROM (
      SELECT account_id, status, sum(delta)::int AS n
      FROM unnest(accounts, statuses, deltas) AS change(account_id, status, delta)
      GROUP BY account_id, status
    ) net
    WHERE n <> 0
    ORDER BY account_id, status
    ON CONFLICT (account_id, status) DO UPDATE SET n = c.n + excluded.n
    RETURNING account_id, status, n
  )
  SELECT array_agg(account_id) FILTER (WHERE n = 0), array_agg(status) FILTER (WHERE n = 0)
    INTO emptied_accounts, emptied_statuses FROM changed;
  -- A status an account has no job left in drops out. Only rows this statement just wrote, and
  -- so holds locked: deleting any other could wait on a lock out of order.
  IF emptied_accounts IS NOT NULL THEN
    DELETE FROM job_status_counts c USING unnest(emptied_accounts, emptied_statuses) AS e(account_id, status)
    WHERE c.account_id = e.account_id AND c.status = e.status AND c.n = 0;
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION "job_status_counts_clear"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM job_status_counts;
  RETURN NULL;
END $$;

-- Recounts from the jobs themselves, for a database restored or written with triggers disabled
-- (docs/operations.md). Writers of jobs wait until the calling transaction ends.
CREATE FUNCTION "job_status_counts_rebuild"() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
  DELETE FROM job_status_counts;
  INSERT INTO job_status_counts (account_id, status, n)
  SELECT account_id, status, count(*) FROM jobs GROUP BY account_id, status;
END $$;

-- Named after the queue-count triggers, so they fire after them (same event, name order): every
-- statement locks the two tables' rows in the same order.
CREATE TRIGGER "jobs_status_count_inserted" AFTER INSERT ON "jobs"
  REFERENCING NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_status_counts_apply();
CREATE TRIGGER "jobs_status_count_updated" AFTER UPDATE ON "jobs"
  REFERENCING OLD TABLE AS old_jobs NEW TABLE AS new_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_status_counts_apply();
CREATE TRIGGER "jobs_status_count_deleted" AFTER DELETE ON "jobs"
  REFERENCING OLD TABLE AS old_jobs FOR EACH STATEMENT EXECUTE FUNCTION job_status_counts_apply();
CREATE TRIGGER "jobs_status_count_truncated" AFTER TRUNCATE ON "jobs"
  FOR EACH STATEMENT EXECUTE FUNCTION job_status_counts_clear();

-- This migration runs in one transaction: the triggers and the first count see the same jobs.
SELECT job_status_counts_rebuild();
