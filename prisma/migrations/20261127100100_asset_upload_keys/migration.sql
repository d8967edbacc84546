-- Idempotency-Key of asset uploads: single-use for 24 h, naming the asset its upload recorded.
CREATE TABLE "asset_upload_keys" (
    "account_id" UUID NOT NULL,
    "key" TEXT NOT NULL,
    "asset_id" UUID NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "asset_upload_keys_pkey" PRIMARY KEY ("account_id","key")
);

CREATE INDEX "asset_upload_keys_expires_at_idx" ON "asset_upload_keys"("expires_at");

ALTER TABLE "asset_upload_keys" ADD CONSTRAINT "asset_upload_keys_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
