-- v1 history shows what the socket sent, as the engine's does: the run's execution messages as the
-- worker forwarded them (execution_start, execution_cached, and its ending), and the prompt as the
-- client sent it, nodes that failed validation included, where that differs from the workflow the
-- job runs. Both are null for jobs from before (their history is rebuilt from the job, as before).
ALTER TABLE "jobs" ADD COLUMN "engine_messages" JSONB;
ALTER TABLE "jobs" ADD COLUMN "submitted_prompt" JSONB;
