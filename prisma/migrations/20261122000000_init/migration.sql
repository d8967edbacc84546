-- CreateEnum
CREATE TYPE "JobStatus" AS ENUM ('queued', 'running', 'succeeded', 'canceling', 'canceled', 'failed', 'expired');

-- CreateEnum
CREATE TYPE "AccountStatus" AS ENUM ('active', 'inactive');

-- CreateEnum
CREATE TYPE "DeploymentStatus" AS ENUM ('starting', 'ready', 'stopped');

-- CreateTable
CREATE TABLE "accounts" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "tier" TEXT NOT NULL DEFAULT 'free',
    "status" "AccountStatus" NOT NULL DEFAULT 'active',
    "credit_balance" BIGINT NOT NULL DEFAULT 0,
    "max_concurrent_jobs" INTEGER NOT NULL DEFAULT 1,
    "max_queued_jobs" INTEGER NOT NULL DEFAULT 100,
    "requests_per_minute" INTEGER NOT NULL DEFAULT 600,
    "max_event_streams" INTEGER NOT NULL DEFAULT 20,
    "router_enabled" BOOLEAN NOT NULL DEFAULT false,
    "router_entitlements" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "router_max_concurrent" INTEGER NOT NULL DEFAULT 4,
    "router_spend_cap_cents" INTEGER NOT NULL DEFAULT 1000,
    "router_window_calls" INTEGER NOT NULL DEFAULT 600,
    "router_window_seconds" INTEGER NOT NULL DEFAULT 60,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "accounts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_keys" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "name" TEXT NOT NULL DEFAULT 'default',
    "prefix" TEXT NOT NULL,
    "hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(3),
    "last_used_at" TIMESTAMPTZ(3),

    CONSTRAINT "api_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "credit_ledger" (
    "id" BIGSERIAL NOT NULL,
    "account_id" UUID NOT NULL,
    "amount" BIGINT NOT NULL,
    "reason" TEXT NOT NULL,
    "ref" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "credit_ledger_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "blobs" (
    "hash" TEXT NOT NULL,
    "size_bytes" BIGINT NOT NULL,
    "storage_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "blobs_pkey" PRIMARY KEY ("hash")
);

-- CreateTable
CREATE TABLE "assets" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "blob_hash" TEXT NOT NULL,
    "file_path" TEXT NOT NULL,
    "content_type" TEXT NOT NULL,
    "tags" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "job_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3),

    CONSTRAINT "assets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "jobs" (
    "id" UUID NOT NULL,
    "account_id" UUID NOT NULL,
    "number" BIGSERIAL NOT NULL,
    "status" "JobStatus" NOT NULL DEFAULT 'queued',
    "source" TEXT NOT NULL DEFAULT 'v2',
    "client_id" TEXT,
    "deployment_id" TEXT,
    "workflow" JSONB NOT NULL,
    "output_nodes" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMPTZ(3),
    "completed_at" TIMESTAMPTZ(3),
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "queue_deadline_at" TIMESTAMPTZ(3),
    "run_deadline_at" TIMESTAMPTZ(3),
    "progress" JSONB,
    "error" JSONB,
    "queue_ms" INTEGER,
    "execution_ms" INTEGER,
    "engine_prompt_id" TEXT,
    "worker_id" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "cancel_requested_at" TIMESTAMPTZ(3),
    "charged_credits" BIGINT,
    "log_text" TEXT,
    "log_truncated" BOOLEAN NOT NULL DEFAULT false,
    "log_captured_at" TIMESTAMPTZ(3),
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "jobs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "job_outputs" (
    "id" BIGSERIAL NOT NULL,
    "job_id" UUID NOT NULL,
    "asset_id" UUID NOT NULL,
    "node_id" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "engine_key" TEXT NOT NULL,
    "engine_type" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "job_outputs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "idempotency_records" (
    "account_id" UUID NOT NULL,
    "key" TEXT NOT NULL,
    "request_hash" TEXT NOT NULL,
    "job_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "idempotency_records_pkey" PRIMARY KEY ("account_id","key")
);

-- CreateTable
CREATE TABLE "deployments" (
    "id" TEXT NOT NULL,
    "account_id" UUID NOT NULL,
    "workflow" JSONB NOT NULL,
    "status" "DeploymentStatus" NOT NULL DEFAULT 'starting',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deployments_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "router_models" (
    "id" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "adapter_kind" TEXT NOT NULL,
    "upstream_url" TEXT NOT NULL,
    "input_schema" JSONB NOT NULL,
    "price_cents" INTEGER NOT NULL,
    "charges_on_policy_rejection" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "router_models_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "router_calls" (
    "id" TEXT NOT NULL,
    "account_id" UUID NOT NULL,
    "model_id" TEXT NOT NULL,
    "idempotency_key" TEXT,
    "request_hash" TEXT,
    "state" TEXT NOT NULL DEFAULT 'running',
    "outcome" TEXT,
    "http_status" INTEGER,
    "response_type" TEXT,
    "response_body" BYTEA,
    "provider_handle" TEXT,
    "cost_cents" INTEGER NOT NULL DEFAULT 0,
    "charged" BOOLEAN NOT NULL DEFAULT false,
    "duration_ms" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "router_calls_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "api_keys_hash_key" ON "api_keys"("hash");

-- CreateIndex
CREATE INDEX "api_keys_account_id_idx" ON "api_keys"("account_id");

-- CreateIndex
CREATE INDEX "credit_ledger_account_id_created_at_idx" ON "credit_ledger"("account_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "credit_ledger_reason_ref_key" ON "credit_ledger"("reason", "ref");

-- CreateIndex
CREATE INDEX "assets_account_id_blob_hash_idx" ON "assets"("account_id", "blob_hash");

-- CreateIndex
CREATE INDEX "assets_job_id_idx" ON "assets"("job_id");

-- CreateIndex
CREATE INDEX "assets_expires_at_idx" ON "assets"("expires_at");

-- CreateIndex
CREATE INDEX "jobs_account_id_created_at_id_idx" ON "jobs"("account_id", "created_at" DESC, "id");

-- CreateIndex
CREATE INDEX "jobs_account_id_status_idx" ON "jobs"("account_id", "status");

-- CreateIndex
CREATE INDEX "jobs_status_created_at_idx" ON "jobs"("status", "created_at");

-- CreateIndex
CREATE INDEX "jobs_expires_at_idx" ON "jobs"("expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "job_outputs_job_id_node_id_engine_key_name_key" ON "job_outputs"("job_id", "node_id", "engine_key", "name");

-- CreateIndex
CREATE INDEX "idempotency_records_expires_at_idx" ON "idempotency_records"("expires_at");

-- CreateIndex
CREATE INDEX "router_calls_account_id_created_at_idx" ON "router_calls"("account_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "router_calls_account_id_idempotency_key_key" ON "router_calls"("account_id", "idempotency_key");

-- AddForeignKey
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "credit_ledger" ADD CONSTRAINT "credit_ledger_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "assets" ADD CONSTRAINT "assets_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "assets" ADD CONSTRAINT "assets_blob_hash_fkey" FOREIGN KEY ("blob_hash") REFERENCES "blobs"("hash") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "assets" ADD CONSTRAINT "assets_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "jobs" ADD CONSTRAINT "jobs_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "job_outputs" ADD CONSTRAINT "job_outputs_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "job_outputs" ADD CONSTRAINT "job_outputs_asset_id_fkey" FOREIGN KEY ("asset_id") REFERENCES "assets"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "idempotency_records" ADD CONSTRAINT "idempotency_records_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "idempotency_records" ADD CONSTRAINT "idempotency_records_job_id_fkey" FOREIGN KEY ("job_id") REFERENCES "jobs"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "router_calls" ADD CONSTRAINT "router_calls_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
