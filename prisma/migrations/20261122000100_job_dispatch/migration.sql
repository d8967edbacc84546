-- AlterTable
ALTER TABLE "jobs" ADD COLUMN     "dispatched_at" TIMESTAMPTZ(3);
