-- Partial indexes for the dispatcher (not expressible in schema.prisma): each pass finds the
-- accounts with waiting jobs, their first few waiting jobs and how many jobs each already has
-- handed out, without reading the whole queue. A backlog of thousands of jobs made every pass,
-- run after every finished job, scan and sort all of it.
CREATE INDEX "jobs_waiting_idx" ON "jobs"("account_id", "created_at", "id") WHERE "status" = 'queued' AND "dispatched_at" IS NULL;
CREATE INDEX "jobs_handed_out_idx" ON "jobs"("account_id") WHERE "status" IN ('running', 'canceling') OR ("status" = 'queued' AND "dispatched_at" IS NOT NULL);
