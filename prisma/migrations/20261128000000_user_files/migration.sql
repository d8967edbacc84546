-- The engine's user folder per account (v1 `/api/userdata`, `/api/settings`): saved workflows,
-- settings (`comfy.settings.json`), anything a ComfyUI client keeps there. Files are small and
-- bounded (USERDATA_MAX_FILE_BYTES, USERDATA_MAX_ACCOUNT_BYTES), so the bytes live in the row.
-- Folders are not rows: a folder exists while a file lies under it.
CREATE TABLE "user_files" (
    "account_id" UUID NOT NULL,
    "path" TEXT NOT NULL,
    "content" BYTEA NOT NULL,
    "content_type" TEXT NOT NULL,
    "size_bytes" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "modified_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "user_files_pkey" PRIMARY KEY ("account_id", "path")
);

ALTER TABLE "user_files" ADD CONSTRAINT "user_files_account_id_fkey" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
