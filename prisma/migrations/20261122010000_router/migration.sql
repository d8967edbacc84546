-- AlterTable
ALTER TABLE "router_models" ADD COLUMN     "input_schema_text" TEXT NOT NULL DEFAULT '',
ADD COLUMN     "timeout_ms" INTEGER NOT NULL DEFAULT 300000,
ADD COLUMN     "poll_interval_ms" INTEGER NOT NULL DEFAULT 1000;

-- AlterTable
ALTER TABLE "router_calls" ADD COLUMN     "result_bucket" TEXT,
ADD COLUMN     "replay_of" TEXT;
