import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings of the long-running services (api, worker), applied first thing in their main.
 *
 * Node 24's V8 raised the young generation's cap from 8 to 32 MB, and with it the amount of
 * short-lived Buffer memory (socket reads, stream chunks) that triggers a cheap scavenge: past
 * V8's 64 MB external-memory limit, it now takes full mark-compacts to free it (nodejs/node#61967).
 * Streaming a 1 GiB upload then grew the API by 54-66 MiB instead of 21-24 MiB, and spent 16% of
 * its time in the collector instead of 3%. The old cap restores the old behaviour.
 */
export function tuneRuntime(): void {
  setFlagsFromString('--scavenger-max-new-space-capacity-mb=8');
}
