-- The bytes of model files (assets under models/<folder>/) an account may keep; its tier sets it,
-- operators may override it. Accounts from before get the free tier's 10 GiB.
ALTER TABLE "accounts" ADD COLUMN "max_model_bytes" BIGINT NOT NULL DEFAULT 10737418240;
