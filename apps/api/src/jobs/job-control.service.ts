import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import type { Job } from '#libs/db';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { ExtraDataVault, JobEventLog, JobStore, runJobId, type JobKeys, type JobScope, type RunPayload } from '#libs/jobs';
import { CONFIG, REDIS } from '../core/tokens.js';
import { JOB_KEYS, RUN_QUEUE, Scheduling } from './job-system.providers.js';

/**
 * Cancel, per the contract's state table: a queued job leaves the queue and is canceled at once;
 * a running job becomes `canceling` and its worker is told to interrupt the engine (told again at
 * each further cancel while it is canceling); finished jobs are left as they are. Every step is a
 * guarded transition, so a cancel racing a worker's start or finish resolves in the database.
 */
@Injectable()
export class JobControl {
  constructor(
    private readonly jobs: JobStore,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(RUN_QUEUE) private readonly queue: Queue<RunPayload>,
    private readonly vault: ExtraDataVault,
    private readonly events: JobEventLog,
    private readonly scheduling: Scheduling,
    @Inject(REDIS) private readonly redis: Redis,
    @Inject(JOB_KEYS) private readonly keys: JobKeys,
  ) {}

  async cancel(job: Job): Promise<void> {
    let current: Job | null = job;
    for (let attempt = 0; attempt < 3 && current; attempt++) {
      if (current.status === 'queued') {
        const done = await this.jobs.finish(current.id, { status: 'canceled' }, this.config.jobs.creditsPerSecond);
        if (done) {
          if (current.dispatchedAt) {
            await this.queue.remove(runJobId(current.id, current.dispatchedAt)).catch(() => undefined);
          }
          await this.vault.delete(current.id).catch(() => undefined);
          await this.events.append(current.id, current.accountId, 'status', { status: 'canceled', queue_position: null });
          this.scheduling.kick();
          return;
        }
      } else if (current.status === 'running') {
        const moved = await this.jobs.transition(current.id, ['running'], 'canceling', { cancelRequestedAt: new Date() });
        if (moved) {
          await this.signal(current.id);
          await this.events.append(current.id, current.accountId, 'status', { status: 'canceling', queue_position: null });
          return;
        }
      } else if (current.status === 'canceling') {
        // Asked again: the worker is told again. The first signal may have failed after the row
        // moved (Redis away), and nothing else would tell the worker; telling it twice is harmless.
        await this.signal(current.id);
        return;
      } else {
        return; // terminal: nothing changes
      }
      current = await this.jobs.get(job.id);
    }
  }

  /**
   * Takes the scope's ended jobs (those of `ids`, or all when null) out of v1 history. The jobs
   * stay: v2 still lists them and their outputs stay downloadable.
   */
  hideFromHistory(scope: JobScope, ids: string[] | null): Promise<void> {
    return this.jobs.hideFromHistory(scope, ids);
  }

  /** Reaches the worker holding the job wherever it runs: a flag it polls and a message it hears. */
  private async signal(jobId: string): Promise<void> {
    const { redis, keys } = this;
    await redis.set(keys.cancelFlag(jobId), 'cancel', 'EX', 24 * 3600);
    await redis.publish(keys.cancelChannel, jobId);
  }
}
