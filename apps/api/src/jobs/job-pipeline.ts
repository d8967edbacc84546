import { Inject, Injectable, type OnApplicationShutdown, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import type { Db, Job } from '#libs/db';
import {
  Dispatcher,
  ExtraDataVault,
  JobEventLog,
  EngineReportCache,
  Sweeper,
  WorkerRegistry,
  createRunQueue,
  jobKeys,
  JobStore,
  type EngineModels,
  type JobKeys,
  type RunPayload,
} from '#libs/jobs';
import type { BlobStore } from '#libs/storage';
import type { NodeDefinitions } from '#libs/workflow';
import { BLOB_STORE, CONFIG, DB, REDIS } from '../core/tokens.js';
import { BatchedReads } from './batched-reads.js';

const POSITIONS_TTL_MS = 250;

/** The job machinery the API shares with the workers: queue, dispatcher, event log, secrets vault. */
@Injectable()
export class JobPipeline implements OnModuleInit, OnModuleDestroy, OnApplicationShutdown {
  readonly keys: JobKeys;
  readonly queue: Queue<RunPayload>;
  readonly events: JobEventLog;
  readonly vault: ExtraDataVault;
  readonly registry: WorkerRegistry;
  readonly dispatcher: Dispatcher;
  readonly definitions: EngineReportCache<NodeDefinitions>;
  /** The engines' model and embedding names, which v1 clients list. */
  readonly models: EngineReportCache<EngineModels>;
  /**
   * Job statuses for the event streams that poll (each waiting job's stream every second; an
   * enterprise account may hold 5,000), read together: at most a hundred queries a second, a
   * gathering delay a once-a-second poll does not notice, and a parameter count Postgres accepts.
   */
  readonly statusReads: BatchedReads<Pick<Job, 'status' | 'createdAt'>>;
  /** Positions of brand-new jobs, counted together (see `queuePositions`). */
  private readonly freshPositionReads: BatchedReads<number>;
  private readonly sweeper: Sweeper;
  private positions: { at: number; map: Promise<Map<string, number>> } | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private kicking = false;
  private kickAgain = false;

  constructor(
    @Inject(CONFIG) readonly config: Config,
    @Inject(DB) private readonly db: Db,
    @Inject(REDIS) readonly redis: Redis,
    @Inject(BLOB_STORE) store: BlobStore,
    private readonly jobs: JobStore,
  ) {
    this.keys = jobKeys(config.redisPrefix);
    this.queue = createRunQueue({ url: config.redisUrl, enableOfflineQueue: false, maxRetriesPerRequest: 2 } as never, this.keys);
    this.events = new JobEventLog(redis, this.keys, config.jobs.retentionSeconds * 1000);
    this.vault = new ExtraDataVault(redis, this.keys, config.signingSecret);
    this.registry = new WorkerRegistry(redis, this.keys);
    this.dispatcher = new Dispatcher(jobs, redis, this.queue, this.registry, this.keys);
    this.definitions = new EngineReportCache<NodeDefinitions>(redis, this.keys.nodeDefinitions);
    this.models = new EngineReportCache<EngineModels>(redis, this.keys.engineModels);
    this.statusReads = new BatchedReads<Pick<Job, 'status' | 'createdAt'>>(
      (ids) => jobs.statuses(ids),
      { gatherMs: 10, maxIds: 1_000 },
    );
    // No cap on the ids: those of one response must be counted by the same query.
    this.freshPositionReads = new BatchedReads((ids) => jobs.queuePositionsOf(ids));
    this.sweeper = new Sweeper(db, redis, this.queue, this.registry, this.dispatcher, this.events, store, this.keys, {
      creditsPerSecond: config.jobs.creditsPerSecond,
      maxAttempts: config.jobs.maxAttempts,
      deadlineGraceMs: 30_000,
    });
  }

  onModuleInit(): void {
    // API replicas sweep too, so queue deadlines and retention hold even with no worker running.
    this.sweepTimer = setInterval(() => void this.sweeper.sweep().catch(() => undefined), 5_000);
  }

  onModuleDestroy(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  // Submissions in flight during a stop still enqueue: the queue closes after the HTTP server.
  async onApplicationShutdown(): Promise<void> {
    await this.queue.close().catch(() => undefined);
  }

  /** Fire and forget: a submission never waits on scheduling. */
  kick(): void {
    // Under a burst of submissions one dispatch at a time per replica is enough: kicks that come
    // in meanwhile fold into a single follow-up pass.
    if (this.kicking) {
      this.kickAgain = true;
      return;
    }
    this.kicking = true;
    void this.dispatcher
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

  /** The queue position of one waiting job; see `queuePositions`. */
  async queuePosition(jobId: string, createdAt: Date): Promise<number | null> {
    return (await this.queuePositions([{ id: jobId, createdAt }])).get(jobId) ?? null;
  }

  /**
   * Positions of several waiting jobs as of one moment, so that one response never shows a newer
   * job ahead of an older one: either all come from the same ranking, or all are counted afresh in
   * one query.
   *
   * The ranking orders the whole queue and is shared by everyone polling older jobs: it is made
   * at most every 250 ms per replica, or less often when it is itself slow (a long backlog), so the
   * database spends at most a quarter of its time on it. Brand-new jobs (a submission's answer) are
   * always counted on their own: cheaper, and a burst of submissions never waits on a ranking.
   */
  async queuePositions(jobs: { id: string; createdAt: Date }[]): Promise<Map<string, number>> {
    if (jobs.length === 0) return new Map();
    const ids = jobs.map((job) => job.id);
    const now = Date.now();
    if (jobs.some((job) => now - job.createdAt.getTime() < POSITIONS_TTL_MS)) return this.freshPositions(ids);
    if (!this.positions || now - this.positions.at > Math.max(POSITIONS_TTL_MS, 4 * this.rankingMs)) {
      const map = this.jobs.queuePositions();
      this.positions = { at: now, map };
      void map.then(() => (this.rankingMs = Date.now() - now)).catch(() => undefined);
    }
    const ranking = this.positions;
    if (jobs.every((job) => ranking.at >= job.createdAt.getTime())) {
      const ranked = await ranking.map;
      // A job committed just after the ranking read its snapshot is missing from it.
      if (ids.every((id) => ranked.has(id))) return new Map(ids.map((id) => [id, ranked.get(id)!]));
    }
    return this.freshPositions(ids);
  }

  private rankingMs = 0;

  /** Fresh counts share queries (BatchedReads): a longer queue means larger batches, not more queries. */
  private async freshPositions(jobIds: string[]): Promise<Map<string, number>> {
    const positions = await Promise.all(jobIds.map((id) => this.freshPositionReads.read(id)));
    // A job no longer waiting (started meanwhile) has no position.
    return new Map(jobIds.flatMap((id, i) => (positions[i] === null ? [] : [[id, positions[i]!] as const])));
  }
}
