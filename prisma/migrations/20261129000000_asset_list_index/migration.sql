-- GET /api/v2/assets: an account's assets, newest first, a page at a time.
CREATE INDEX "assets_account_id_created_at_id_idx" ON "assets"("account_id", "created_at" DESC, "id" DESC);
