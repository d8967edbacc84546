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
 */
export const SERVICE_NODE_FLAGS = ['--scavenger-max-new-space-capacity-mb=8'];

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
