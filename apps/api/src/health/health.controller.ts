import { Controller, Get, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Db } from '#libs/db';
import { StorageWriteProbe, type BlobStore } from '#libs/storage';
import { BLOB_STORE, CONFIG, DB, REDIS } from '../core/tokens.js';
import { shedReason } from '../http/overload.js';

async function check(name: string, probe: () => Promise<unknown>): Promise<[string, string]> {
  try {
    await Promise.race([probe(), new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2_000))]);
    return [name, 'ok'];
  } catch (err) {
    return [name, `error: ${(err as Error).message.split('\n')[0]?.slice(0, 120) ?? 'unknown'}`];
  }
}
@Controller()
export class HealthController {
  private readonly storage: StorageWriteProbe;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(BLOB_STORE) store: BlobStore,
    @Inject(CONFIG) config: Config,
  ) {
    this.storage = new StorageWriteProbe(store, config.readiness.storageProbeIntervalMs);
  }

  /** Alive: the process answers. Never shed, whatever the load: a busy replica is not a dead one. */
  @Get('healthz')
  healthz(): { status: 'ok' } {
    return { status: 'ok' };
  }

  /**
   * Ready: every dependency a request needs answers, the blob store takes writes, and the replica
   * is not shedding load (a balancer then sends its traffic to the others until it catches up).
   */
  @Get('readyz')
  async readyz(@Res() reply: FastifyReply): Promise<void> {
    const checks = Object.fromEntries(
      await Promise.all([
        check('postgres', () => this.db.$queryRaw`SELECT 1`),
        check('redis', () => this.redis.ping()),
        check('storage', () => this.storage.check()),
        check('load', async () => {
          const shedding = shedReason(reply.server);
          if (shedding) throw new Error(shedding);
        }),
      ]),
    );
    const ready = Object.values(checks).every((v) => v === 'ok');
    reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  }
}
