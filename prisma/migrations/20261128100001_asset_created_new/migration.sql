-- Whether an asset's bytes were new to its account when it was recorded: what its upload answered
-- in `created_new`, kept so that every later read of the asset says the same.
ALTER TABLE "assets" ADD COLUMN "created_new" BOOLEAN NOT NULL DEFAULT false;

-- Assets from before: the oldest record of each account's bytes is the one whose upload stored them
-- first (a copy or a from-hash record came after it).
UPDATE "assets" SET "created_new" = true
WHERE "id" IN (SELECT DISTINCT ON ("account_id", "blob_hash") "id" FROM "assets" ORDER BY "account_id", "blob_hash", "created_at", "id");
