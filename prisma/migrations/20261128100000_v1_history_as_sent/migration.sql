-- v1 history shows what the socket sent, as the engine's does: the run's execution messages as the
-- worker forwarded them (execution_start, execution_cached, and its ending). Null for jobs from
-- before (their history is rebuilt from the job, as before). The prompt as sent is
-- jobs.submitted_workflow.
ALTER TABLE "jobs" ADD COLUMN "engine_messages" JSONB;
