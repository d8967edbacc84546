-- A job is charged for the engine's time, summed over the runs that reported it, not for the
-- wall-clock time since its first start (a run lost with its worker costs nothing).
ALTER TABLE jobs ADD COLUMN billed_ms integer NOT NULL DEFAULT 0;
