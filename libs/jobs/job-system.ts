import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Db, Job } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import type { NodeDefinitions } from '#libs/workflow';
import { BatchedReads } from './batched-reads.js';
import { Dispatcher } from './dispatcher.js';
import { EngineReportCache, type EngineModels } from './engine-reports.js';
import { JobEventLog } from './events.js';
import { ExtraDataVault } from './extra-data.js';
import { JobStore } from './job-store.js';
import { jobKeys, type JobKeys } from './keys.js';
import { QueuePositions } from './queue-positions.js';
import { createRunQueue, type RunPayload } from './run-queue.js';
import { Sweeper } from './sweeper.js';
import { WorkerRegistry } from './worker-registry.js';
import { RunLeases } from './run-lease.js';

/**
 * A running job past its deadline by this much is ended by the sweeper even if its worker says
 * nothing: the worker's own timer stops it first, and its ending needs a moment to be written.
 */
export const DEADLINE_GRACE_MS = 30_000;

/** How often each kind of process sweeps. API replicas sweep too, so deadlines and retention hold with no worker running. */
export const SWEEP_EVERY_MS = { api: 5_000, worker: 2_000 } as const;

export type JobSystemRole = keyof typeof SWEEP_EVERY_MS;

/** Everything the processes share to run jobs, built once per process by `createJobSystem`. */
export interface JobSystem {
  keys: JobKeys;
  jobs: JobStore;
  queue: Queue<RunPayload>;
  events: JobEventLog;
  vault: ExtraDataVault;
  registry: WorkerRegistry;
  /** The Redis side of runs' leases, which fences their events. */
  leases: RunLeases;
  dispatcher: Dispatcher;
  sweeper: Sweeper;
  /** The engines' node definitions, which the API validates workflows against. */
  definitions: EngineReportCache<NodeDefinitions>;
  /** The engines' model and embedding names, which v1 clients list. */
  models: EngineReportCache<EngineModels>;
  /**
   * Job statuses for the event streams that poll (each waiting job's stream every second; an
   * enterprise account may hold 5,000), read together: at most a hundred queries a second, a
   * gathering delay a once-a-second poll does not notice, and a parameter count Postgres accepts.
   */
  statusReads: BatchedReads<Pick<Job, 'status' | 'createdAt'>>;
  positions: QueuePositions;
}

export interface JobSystemParts {
  config: Config;
  db: Db;
  /** The process's shared connection (the run queue opens its own). */
  redis: Redis;
  store: BlobStore;
  role: JobSystemRole;
  /** The store over `db`, when the process has one already. */
  jobs?: JobStore;
}

/**
 * Builds the job system of one process, the same way for the API and the worker. Their one
 * difference is how the run queue's connection meets a Redis outage: the API's producers fail
 * fast (a submission answers an error rather than hang); a worker's commands wait for Redis to
 * come back (a restart must not fail the run that happens to be writing).
 */
export function createJobSystem({ config, db, redis, store, role, jobs = new JobStore(db) }: JobSystemParts): JobSystem {
  const keys = jobKeys(config.redisPrefix);
  const connection = role === 'api' ? { url: config.redisUrl, enableOfflineQueue: false, maxRetriesPerRequest: 2 } : { url: config.redisUrl, maxRetriesPerRequest: null };
  const queue = createRunQueue(connection as never, keys);
  const events = new JobEventLog(redis, keys, config.jobs.retentionSeconds * 1000);
  const registry = new WorkerRegistry(redis, keys);
  const dispatcher = new Dispatcher(jobs, redis, queue, keys);
  const sweeper = new Sweeper(db, redis, queue, registry, dispatcher, events, store, keys, {
    creditsPerSecond: config.jobs.creditsPerSecond,
    maxAttempts: config.jobs.maxAttempts,
    deadlineGraceMs: DEADLINE_GRACE_MS,
  }, jobs);
  return {
    keys,
    jobs,
    queue,
    events,
    vault: new ExtraDataVault(redis, keys, config.signingSecret),
    registry,
    leases: new RunLeases(redis, keys),
    dispatcher,
    sweeper,
    definitions: new EngineReportCache<NodeDefinitions>(redis, keys.nodeDefinitions),
    models: new EngineReportCache<EngineModels>(redis, keys.engineModels),
    statusReads: new BatchedReads((ids) => jobs.statuses(ids), { gatherMs: 10, maxIds: 1_000 }),
    positions: new QueuePositions(jobs),
  };
}
