import { Queue, type ConnectionOptions } from 'bullmq';
import type { JobKeys } from './keys.js';

/** What a queued run carries: ids only. The workflow is read from PostgreSQL, secrets from the vault. */
export interface RunPayload {
  jobId: string;
  accountId: string;
}

export function createRunQueue(connection: ConnectionOptions, keys: JobKeys): Queue<RunPayload> {
  return new Queue<RunPayload>(keys.queueName, {
    connection,
    prefix: keys.bullPrefix,
    defaultJobOptions: { removeOnComplete: true, removeOnFail: { age: 24 * 3600, count: 10_000 } },
  });
}

/** BullMQ job ids are unique per dispatch, so a job that comes back can be dispatched again. */
export function runJobId(jobId: string, dispatchedAt: Date): string {
  return `${jobId}.${dispatchedAt.getTime()}`;
}

export function jobIdOfRun(runId: string): string {
  return runId.split('.')[0]!;
}
