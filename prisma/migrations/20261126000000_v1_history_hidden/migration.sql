-- v1 clients clear or prune the engine's history (`POST /api/history`). The jobs stay, for v2 and
-- their outputs, as the engine keeps the output files; they only leave the v1 history. A constant
-- default makes this a catalog change, not a rewrite of the table.
ALTER TABLE "jobs" ADD COLUMN "history_hidden" BOOLEAN NOT NULL DEFAULT false;
