import type { Redis } from 'ioredis';
import { deleteAssetsAndOrphanBlobs } from '#libs/assets';
import { Prisma, type Db } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import type { Dispatcher } from './dispatcher.js';
import type { JobEventLog } from './events.js';
import type { JobKeys } from './keys.js';
import type { Queue } from 'bullmq';
import { runJobId, type RunPayload } from './run-queue.js';
import { expiryError } from './deadlines.js';
import { storeOf, type JobStore } from './job-store.js';
import type { WorkerRegistry } from './worker-registry.js';
import { RunLeases } from './run-lease.js';

// Jobs (or assets) expired or deleted per statement, and the time one pass may spend on each kind.
const PURGE_BATCH = 500;
const PASS_BUDGET_MS = 3_000;

export interface SweeperOptions {
  creditsPerSecond: number;
  /** How many times a job whose worker vanished is handed out again before it fails. */
  maxAttempts: number;
  /** A running job past its deadline by this much is ended even if its worker says nothing. */
  deadlineGraceMs: number;
  /**
   * How long each batched step of a pass (expiring, purging) goes on taking more batches; the
   * first batch always runs. Default 3 s: a pass still ends within seconds, the next goes on.
   */
  passBudgetMs?: number;
}

export interface SweepReport {
  redispatched: number;
  requeued: number;
  lost: number;
  expired: number;
  purgedJobs: number;
  purgedAssets: number;
}

/**
 * The safety net that makes "never stuck" hold: whatever a crash, a restart or a lost message
 * left behind, a pass puts right. One pass at a time across all processes (a Redis lock).
 */
export class Sweeper {
  private readonly jobs: JobStore;
  private readonly leases: RunLeases;

  constructor(
    private readonly db: Db,
    private readonly redis: Redis,
    private readonly queue: Queue<RunPayload>,
    private readonly registry: WorkerRegistry,
    private readonly dispatcher: Dispatcher,
    private readonly events: JobEventLog,
    private readonly store: BlobStore,
    private readonly keys: JobKeys,
    private readonly options: SweeperOptions,
    jobs?: JobStore,
  ) {
    this.jobs = jobs ?? storeOf(db);
    this.leases = new RunLeases(redis, keys);
  }

  async sweep(now = new Date()): Promise<SweepReport | null> {
    const locked = await this.redis.set(this.keys.sweeperLock, String(process.pid), 'PX', 30_000, 'NX');
    if (!locked) return null;
    try {
      const report: SweepReport = { redispatched: 0, requeued: 0, lost: 0, expired: 0, purgedJobs: 0, purgedAssets: 0 };
      report.redispatched = await this.redispatchLostRuns(now);
      const lostWork = await this.recoverFromDeadWorkers(now);
      report.requeued = lostWork.requeued;
      report.lost = lostWork.lost;
      report.expired = await this.expireDeadlines(now);
      const purged = await this.purgeRetention(now);
      report.purgedJobs = purged.jobs;
      report.purgedAssets = purged.assets;
      await this.jobs.dropExpiredKeys(now);
      await this.db.assetUploadKey.deleteMany({ where: { expiresAt: { lt: now } } });
      await this.jobs.dropEmptyCounts();
      await this.dispatcher.kick();
      return report;
    } finally {
      await this.redis.del(this.keys.sweeperLock);
    }
  }

  private async status(jobId: string, accountId: string, status: string): Promise<void> {
    await this.events.append(jobId, accountId, 'status', { status, queue_position: null });
  }

  /** Handed to the run queue but gone from it (Redis restarted, a run was dropped): hand out again. */
  private async redispatchLostRuns(now: Date): Promise<number> {
    const candidates = await this.jobs.handedOutBefore(new Date(now.getTime() - 5_000), 500);
    let count = 0;
    for (const job of candidates) {
      const run = await this.queue.getJob(runJobId(job.id, job.dispatchedAt!));
      const state = run ? await run.getState() : 'missing';
      if (state === 'waiting' || state === 'active' || state === 'prioritized' || state === 'delayed') continue;
      if (await this.jobs.unhand(job.id, job.dispatchedAt)) count++;
    }
    return count;
  }

  /** Running on a worker that stopped reporting, or that no longer runs it: run it again elsewhere, or fail it clearly. */
  private async recoverFromDeadWorkers(now: Date): Promise<{ requeued: number; lost: number }> {
    // A live worker counts only for the job it says it runs: a worker restarted under the same id
    // (a pod keeps its name) knows nothing of the job its previous process held.
    const runningOn = new Map((await this.registry.list(now.getTime())).map((w) => [w.id, w.jobId]));
    const orphaned = await this.jobs.runningSilentSince(new Date(now.getTime() - 5_000), 500);
    let requeued = 0;
    let lost = 0;
    for (const job of orphaned) {
      if (job.workerId && runningOn.get(job.workerId) === job.id) continue;
      // The lost run, should its worker come back, reports nothing more: its events are fenced by
      // the lease, left at its attempt so that it can neither use it nor set it again, its records
      // by the job's worker and attempt.
      await this.leases.takeBack(job.id, job.attempts);
      if (job.status === 'canceling') {
        const done = await this.jobs.finish(job.id, { status: 'canceled' }, this.options.creditsPerSecond, now);
        if (done) await this.status(job.id, job.accountId, 'canceled');
        continue;
      }
      if (job.attempts < this.options.maxAttempts) {
        // The next run starts from nothing: the lost run's progress would show work not done.
        const back = await this.jobs.transition(job.id, ['running'], 'queued', { dispatchedAt: null, workerId: null, progress: Prisma.DbNull });
        if (back) {
          requeued++;
          await this.status(job.id, job.accountId, 'queued');
        }
        continue;
      }
      const done = await this.jobs.finish(
        job.id,
        { status: 'failed', error: { code: 'worker_lost', message: `The worker running this job stopped ${job.attempts} times; giving up.` } },
        this.options.creditsPerSecond,
        now,
      );
      if (done) {
        lost++;
        await this.status(job.id, job.accountId, done.status);
      }
    }
    return { requeued, lost };
  }

  /**
   * Ends in `expired` a job that waited past its queue deadline before it first started (a job
   * handed back after its worker vanished has started once), and one past its run deadline,
   * running or waiting to run again. In batches until none is left or the pass has spent its
   * time: a burst of jobs that all miss their deadline would otherwise fill the account's queue
   * limit long after they were due.
   */
  private async expireDeadlines(now: Date): Promise<number> {
    let count = 0;
    await this.inBatches(async () => {
      const late = await this.jobs.late(now, new Date(now.getTime() - this.options.deadlineGraceMs), PURGE_BATCH);
      for (const job of late) {
        const done = await this.jobs.finish(
          job.id,
          { status: 'expired', error: expiryError(job.in_queue ? 'queue' : 'run', job.own_deadline) },
          this.options.creditsPerSecond,
          now,
        );
        if (done) {
          count++;
          await this.redis.set(this.keys.cancelFlag(job.id), 'expired', 'EX', 3600);
          await this.redis.publish(this.keys.cancelChannel, job.id);
          // A job canceling meanwhile ends canceled, not expired (finishJob).
          await this.status(job.id, job.account_id, done.status);
        }
      }
      return late.length;
    });
    return count;
  }

  /**
   * After `expires_at` a job and its outputs are deleted; blobs nobody references go too. In
   * batches, until nothing expired is left or the pass has spent its time: retention keeps pace
   * with thousands of submissions a second, and a pass still ends within seconds.
   */
  private async purgeRetention(now: Date): Promise<{ jobs: number; assets: number }> {
    let jobs = 0;
    let assets = 0;
    await this.inBatches(async () => {
      // Only jobs that ended: one still queued or running past its retention (a retention shorter
      // than its deadlines) is purged once it ends, after it has been charged and its stream ended.
      const ids = await this.jobs.retentionExpired(now, PURGE_BATCH);
      if (ids.length === 0) return 0;
      const owned = await this.db.asset.findMany({ where: { jobId: { in: ids } }, select: { id: true } });
      assets += await deleteAssetsAndOrphanBlobs(this.db, this.store, owned.map((a) => a.id));
      jobs += await this.jobs.deleteMany(ids);
      await Promise.all(ids.map((id) => this.events.drop(id)));
      return ids.length;
    });
    await this.inBatches(async () => {
      const ids = (await this.db.asset.findMany({ where: { expiresAt: { lt: now }, jobId: null }, select: { id: true }, take: PURGE_BATCH })).map((a) => a.id);
      assets += await deleteAssetsAndOrphanBlobs(this.db, this.store, ids);
      return ids.length;
    });
    return { jobs, assets };
  }

  /** Runs `batch` (it returns how many items it found) until one finds less than a full batch, or the pass's budget is spent. */
  private async inBatches(batch: () => Promise<number>): Promise<void> {
    const until = Date.now() + (this.options.passBudgetMs ?? PASS_BUDGET_MS);
    while ((await batch()) >= PURGE_BATCH && Date.now() < until);
  }
}
