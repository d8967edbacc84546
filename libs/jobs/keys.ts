import type { Redis } from 'ioredis';

/** Every Redis key, channel and queue name of the job pipeline, under the deployment's prefix. */
export interface JobKeys {
  prefix: string;
  /** BullMQ's own prefix for the run queue. */
  bullPrefix: string;
  queueName: string;
  events(jobId: string): string;
  /** The job's status and output events again, never trimmed (see `events.ts`). */
  keptEvents(jobId: string): string;
  extraData(jobId: string): string;
  cancelFlag(jobId: string): string;
  /** Which attempt of the job may still report: `<worker id>/<attempt>` (see `RunLease`). */
  lease(jobId: string): string;
  jobEventsChannel: string;
  /** A job's rendering as its run ended it, published just before its terminal status (JobEventLog.appendEnded). */
  jobEndedChannel: string;
  accountChannel: string;
  cancelChannel: string;
  workers: string;
  dispatchLock: string;
  dispatchDirty: string;
  sweeperLock: string;
  /** Engine reports (see `engine-reports.ts`); each has its version at `<key>:version`. */
  nodeDefinitions: string;
  engineModels: string;
}

export function jobKeys(prefix: string): JobKeys {
  return {
    prefix,
    bullPrefix: `${prefix}:bull`,
    queueName: 'engine-jobs',
    events: (jobId) => `${prefix}:job:${jobId}:events`,
    keptEvents: (jobId) => `${prefix}:job:${jobId}:events:kept`,
    extraData: (jobId) => `${prefix}:job:${jobId}:extra`,
    cancelFlag: (jobId) => `${prefix}:job:${jobId}:cancel`,
    lease: (jobId) => `${prefix}:job:${jobId}:lease`,
    jobEventsChannel: `${prefix}:ev:job`,
    jobEndedChannel: `${prefix}:ev:ended`,
    accountChannel: `${prefix}:ev:acct`,
    cancelChannel: `${prefix}:cancel`,
    workers: `${prefix}:workers`,
    dispatchLock: `${prefix}:dispatch:lock`,
    dispatchDirty: `${prefix}:dispatch:dirty`,
    sweeperLock: `${prefix}:sweeper:lock`,
    nodeDefinitions: `${prefix}:engine:object_info`,
    engineModels: `${prefix}:engine:models`,
  };
}

/** Deletes every key under `prefix`: what a deployment (a test stack, a benchmark run) leaves. */
export async function deletePrefixedKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}
