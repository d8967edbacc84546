import { Inject, Injectable, type OnApplicationShutdown, type OnModuleDestroy, type OnModuleInit, type Provider } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Db } from '#libs/db';
import {
  createJobSystem,
  Dispatcher,
  ExtraDataVault,
  JobEventLog,
  JobStore,
  QueuePositions,
  Sweeper,
  SWEEP_EVERY_MS,
  WorkerRegistry,
  type JobSystem,
} from '#libs/jobs';
import type { BlobStore } from '#libs/storage';
import { BLOB_STORE, CONFIG, DB, REDIS } from '../core/tokens.js';

// The job system (libs/jobs createJobSystem, built the same way as in the worker) as Nest
// providers: the whole under JOB_SYSTEM, and each part as its own provider, so a service names
// the parts it uses rather than a bag of them.

export const JOB_SYSTEM = Symbol('JOB_SYSTEM');
export const JOB_KEYS = Symbol('JOB_KEYS');
export const RUN_QUEUE = Symbol('RUN_QUEUE');
export const NODE_DEFINITIONS = Symbol('NODE_DEFINITIONS');
export const ENGINE_MODELS = Symbol('ENGINE_MODELS');
export const STATUS_READS = Symbol('STATUS_READS');

function part(token: symbol | (abstract new (...args: never[]) => unknown), pick: (system: JobSystem) => unknown): Provider {
  return { provide: token, useFactory: pick, inject: [JOB_SYSTEM] };
}

/**
 * The system's timers and the end of its queue connection, and the one way the API asks for a
 * dispatch: fire and forget, a submission never waits on scheduling.
 */
@Injectable()
export class Scheduling implements OnModuleInit, OnModuleDestroy, OnApplicationShutdown {
  private sweepTimer: NodeJS.Timeout | null = null;
  private kicking = false;
  private kickAgain = false;

  constructor(@Inject(JOB_SYSTEM) private readonly system: JobSystem) {}

  onModuleInit(): void {
    // API replicas sweep too, so queue deadlines and retention hold even with no worker running.
    this.sweepTimer = setInterval(() => void this.system.sweeper.sweep().catch(() => undefined), SWEEP_EVERY_MS.api);
  }

  onModuleDestroy(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  // Submissions in flight during a stop still enqueue: the queue closes after the HTTP server.
  async onApplicationShutdown(): Promise<void> {
    await this.system.queue.close().catch(() => undefined);
  }

  kick(): void {
    // Under a burst of submissions one dispatch at a time per replica is enough: kicks that come
    // in meanwhile fold into a single follow-up pass.
    if (this.kicking) {
      this.kickAgain = true;
      return;
    }
    this.kicking = true;
    void this.system.dispatcher
      .kick()
      .catch(() => undefined)
      .finally(() => {
        this.kicking = false;
        if (this.kickAgain) {
          this.kickAgain = false;
          this.kick();
        }
      });
  }
}

export const jobSystemProviders: Provider[] = [
  {
    provide: JOB_SYSTEM,
    useFactory: (config: Config, db: Db, redis: Redis, store: BlobStore, jobs: JobStore) => createJobSystem({ config, db, redis, store, jobs, role: 'api' }),
    inject: [CONFIG, DB, REDIS, BLOB_STORE, JobStore],
  },
  part(JOB_KEYS, (s) => s.keys),
  part(RUN_QUEUE, (s) => s.queue),
  part(JobEventLog, (s) => s.events),
  part(ExtraDataVault, (s) => s.vault),
  part(WorkerRegistry, (s) => s.registry),
  part(Dispatcher, (s) => s.dispatcher),
  part(Sweeper, (s) => s.sweeper),
  part(NODE_DEFINITIONS, (s) => s.definitions),
  part(ENGINE_MODELS, (s) => s.models),
  part(STATUS_READS, (s) => s.statusReads),
  part(QueuePositions, (s) => s.positions),
  Scheduling,
];

/** What the providers above offer to other modules. */
export const jobSystemExports = [JOB_SYSTEM, JOB_KEYS, RUN_QUEUE, JobEventLog, ExtraDataVault, WorkerRegistry, Dispatcher, Sweeper, NODE_DEFINITIONS, ENGINE_MODELS, STATUS_READS, QueuePositions, Scheduling];
