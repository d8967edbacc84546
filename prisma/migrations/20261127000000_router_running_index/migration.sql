-- Partial index for the router's sweep of lost calls (not expressible in schema.prisma). A keyed
-- call's row stays 'running' while its generation runs; the sweep looks for those whose replica
-- died, and through this index reads only rows still running, oldest first, however many
-- completed calls the table holds.
CREATE INDEX "router_calls_running_idx" ON "router_calls"("created_at") WHERE "state" = 'running';
