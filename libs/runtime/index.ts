import { setFlagsFromString } from 'node:v8';

/**
 * V8 flags of the long-running services (api, worker, sim-engine), given on their command line by
 * every launcher: docker/entrypoint.sh, scripts/start-stack.mjs, the tests and the benchmarks.
 *
 * Node 24's V8 raised the young generation's cap from 8 to 32 MB (nodejs/node#61967), which
 * costs twice over:
 * - each process keeps a young generation of up to 128 MB instead of 32: under the load suite the
 *   api peaked at 530-551 MiB and the worker at 340-374 MiB, against 488 and 232 on Node 20;
 * - short-lived Buffer memory (socket reads, stream chunks) no longer triggers a cheap scavenge
 *   before V8's 64 MB external-memory limit, so full mark-compacts free it: a streamed 1 GiB
 *   upload grew the api by 54-66 MiB instead of 21-24, 16% of its time in the collector.
 * The old cap undoes both. The size of the young generation is fixed when the heap is made, so
 * only the command line sets it.
 *
 * The first flag caps what the scavenger uses, not the new space V8 reserves (32 MB), and V8
 * starts a full collection whenever the old generation has less room than that before its next
 * limit. After a full collection the limit is the live heap times a factor V8 picks from how fast
 * the collector ran: at 1.35 on the api's 67 MB heap the room was 24 MB, so marking started again
 * the moment one ended, and every collection after it picked the same factor. One run of the
 * router's re-hosting benchmark in two fell into that mode, start-up deciding which: 36-40 full
 * collections in 45 calls, the api's calls and downloads two to five times slower
 * (docs/performance.md). The second flag fixes the factor at 2: the room is the live heap itself,
 * more than the new space in the api (67 MB live) and the worker (42 MB). Capping the semi-spaces
 * instead also ended it, but its smaller young generation cost more collector time in every run.
 */
export const SERVICE_NODE_FLAGS = ['--scavenger-max-new-space-capacity-mb=8', '--heap-growing-percent=100'];

/**
 * Applies the flags again at run time, first thing in each service's main: a process started
 * without them (a plain `node dist/...`) still gets the cheap scavenge of Buffer memory, which V8
 * reads as it goes.
 */
export function tuneRuntime(): void {
  for (const flag of SERVICE_NODE_FLAGS) setFlagsFromString(flag);
}
export { startHealthServer } from './health-server.js';
export type { Probe } from './health-server.js';
