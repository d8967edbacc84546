-- The workflow as the client sent it, beside the one the worker runs (file names resolved to assets).
ALTER TABLE jobs ADD COLUMN submitted_workflow jsonb;
