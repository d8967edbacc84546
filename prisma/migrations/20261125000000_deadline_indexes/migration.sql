-- Partial indexes for the sweeper's deadlines (not expressible in schema.prisma). Every pass, on
-- every replica, looks for jobs past their queue or run deadline; through the status index that
-- read every queued job each time, work that grew with the backlog. Each index holds only the jobs
-- its deadline applies to, in deadline order, so a pass reads the late ones and stops.
--
-- A first wait: queued and never started.
CREATE INDEX "jobs_queue_deadline_idx" ON "jobs"("queue_deadline_at") WHERE "status" = 'queued' AND "attempts" = 0;
-- A run: started (so it has a run deadline) and not yet ended, running or handed back to the queue.
CREATE INDEX "jobs_run_deadline_idx" ON "jobs"("run_deadline_at") WHERE "status" IN ('queued', 'running', 'canceling') AND "run_deadline_at" IS NOT NULL;
