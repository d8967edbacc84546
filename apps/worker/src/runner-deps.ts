import type { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Db } from '#libs/db';
import type { EngineClient, EngineSocket } from '#libs/engine-protocol';
import type { ExtraDataVault, JobEventLog, JobKeys, JobStore, RunLeases } from '#libs/jobs';
import type { Log } from '#libs/logging';
import type { BlobStore } from '#libs/storage';
import type { NodeDefinitions } from '#libs/workflow';
import type { ModelStaging } from './input-staging.js';

/** What a worker's runs use: the engine and its socket, the stores, and the job system's parts. */
export interface RunnerDeps {
  /** Files and blobs only (input staging, outputs): the job's own row is the store's. */
  db: Db;
  jobs: JobStore;
  redis: Redis;
  store: BlobStore;
  engine: EngineClient;
  socket: EngineSocket;
  events: JobEventLog;
  leases: RunLeases;
  vault: ExtraDataVault;
  keys: JobKeys;
  config: Config;
  workerId: string;
  log: Log;
  /** The engine's node definitions as last read, null before the first read. */
  definitions: () => NodeDefinitions | null;
  /** Where tenants' model files come from and go for a job; null: nowhere. */
  models: ModelStaging | null;
}
