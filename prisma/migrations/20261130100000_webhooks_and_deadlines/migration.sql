-- Signed webhooks (docs/api.md, "Webhooks"): an account's endpoints, and one delivery row per
-- event and endpoint. The delivery rows are the outbox: the statement that changes a job's state
-- (finish, claim, a committed output) inserts them itself, so an event exists exactly when its
-- state change committed. The webhooks process delivers them at least once.
CREATE TABLE "webhook_endpoints" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "url" TEXT NOT NULL,
    "events" TEXT[],
    "description" TEXT NOT NULL DEFAULT '',
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "disabled_reason" TEXT,
    "secret_sealed" TEXT NOT NULL,
    "previous_secret_sealed" TEXT,
    "previous_secret_expires_at" TIMESTAMPTZ(3),
    "failing_since" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_endpoints_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "webhook_endpoints_account_id_created_at_id_idx" ON "webhook_endpoints"("account_id", "created_at" DESC, "id" DESC);

ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "webhook_deliveries" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "endpoint_id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "event_type" TEXT NOT NULL,
    "job_id" UUID,
    "asset_id" UUID,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    -- Microseconds, as now() has them: a row written due now() is due to a claim that starts after it committed.
    "next_attempt_at" TIMESTAMPTZ,
    "lease_until" TIMESTAMPTZ(3),
    "lease_token" UUID,
    "last_attempt_at" TIMESTAMPTZ(3),
    "response_code" INTEGER,
    "latency_ms" INTEGER,
    "error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "webhook_deliveries_endpoint_id_created_at_id_idx" ON "webhook_deliveries"("endpoint_id", "created_at" DESC, "id" DESC);
CREATE INDEX "webhook_deliveries_job_id_idx" ON "webhook_deliveries"("job_id");
-- What the deliverers claim (pending and due, soonest first) and what the oldest-undelivered gauge
-- reads: only pending rows, so neither grows with the delivered history.
CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries"("next_attempt_at") WHERE "status" = 'pending';
CREATE INDEX "webhook_deliveries_pending_idx" ON "webhook_deliveries"("created_at") WHERE "status" = 'pending';

ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_endpoint_id_fkey" FOREIGN KEY ("endpoint_id") REFERENCES "webhook_endpoints"("id") ON DELETE CASCADE ON UPDATE CASCADE;
-- Retention deletes a job's deliveries with it.
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Cancel-After: the job's own deadline, from its submission; null without one.
ALTER TABLE "jobs" ADD COLUMN "deadline_at" TIMESTAMPTZ(3);
