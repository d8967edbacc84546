import { Global, Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { createPrismaClient, type Db } from '#libs/db';
import { JobStore } from '#libs/jobs';
import { createBlobStore } from '#libs/storage';
import { Draining } from './draining.js';
import { BLOB_STORE, CONFIG, DB, REDIS } from './tokens.js';

/** Process-wide resources, built once from the validated configuration. */
@Global()
@Module({})
export class CoreModule implements OnApplicationShutdown {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
  ) {}

  static forConfig(config: Config) {
    return {
      module: CoreModule,
      providers: [
        { provide: CONFIG, useValue: config },
        { provide: DB, useFactory: () => createPrismaClient(config.databaseUrl, 20, { preparedStatements: config.databasePreparedStatements }) },
        {
          provide: REDIS,
          // Producers fail fast instead of queueing commands while Redis is away.
          useFactory: () =>
            // Auto-pipelining sends the commands of concurrent requests in one socket write.
            new Redis(config.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 2, lazyConnect: false, enableAutoPipelining: true }),
        },
        { provide: BLOB_STORE, useFactory: () => createBlobStore(config) },
        // The owner of the jobs table: every service reads and writes jobs through it.
        { provide: JobStore, useFactory: (db: Db) => new JobStore(db), inject: [DB] },
        Draining,
      ],
      exports: [CONFIG, DB, REDIS, BLOB_STORE, JobStore, Draining],
    };
  }

  // Last of all (Nest stops the global module after the others): everything else is done with them.
  async onApplicationShutdown(): Promise<void> {
    await this.db.$disconnect();
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
