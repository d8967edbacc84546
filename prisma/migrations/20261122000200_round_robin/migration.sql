-- AlterTable
ALTER TABLE "accounts" ADD COLUMN     "last_dispatched_at" TIMESTAMPTZ(3);
