import os from 'node:os';
import type { Server } from 'node:http';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import type { Config } from '#libs/config';
import { createLogger, logFunction, type Log } from '#libs/logging';
import type { NodeDefinitions } from '#libs/workflow';
import { createPrismaClient, type Db } from '#libs/db';
import { EngineClient, EngineSocket } from '#libs/engine-protocol';
import { createJobSystem, publishEngineReport, SWEEP_EVERY_MS, type EngineModels, type JobSystem, type RunPayload, type WorkerState } from '#libs/jobs';
import { ProcessMetrics, setEngineReady } from '#libs/metrics';
import { modelEvictionChannel } from '#libs/models';
import { createBlobStore, StorageWriteProbe } from '#libs/storage';
import { startHealthServer } from '#libs/runtime';
import { removeStagingFolders, withoutStagedFiles, withoutStagedNames, type ModelStaging } from './input-staging.js';
import { JobRunner } from './job-runner.js';
import { ModelCache } from './model-cache.js';

/** JSON lines on stdout, each with `base` (role, worker_id); see libs/logging for the levels kept. */
export function jsonLogger(base: Record<string, unknown>, level: string = 'info'): Log {
  return logFunction(createLogger({ base, level, keepLifecycle: true }));
}

async function probe(fn: () => Promise<unknown>): Promise<string> {
  try {
    await Promise.race([fn(), new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2000))]);
    return 'ok';
  } catch (err) {
    return `error: ${(err as Error).message.slice(0, 100)}`;
  }
}

/**
 * One worker process drives one engine: it waits for the engine, then takes one job at a time
 * from the run queue, reports its state every second, and keeps the shared sweeper and the
 * dispatcher going. On SIGTERM it finishes (or hands back) its job before it exits.
 */
export class WorkerProcess {
  readonly id: string;
  private readonly log: Log;
  private readonly db: Db;
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private readonly engine: EngineClient;
  private readonly socket: EngineSocket;
  private readonly system: JobSystem;
  private readonly runner: JobRunner;
  private readonly storage: StorageWriteProbe;
  private readonly metrics = new ProcessMetrics('worker');
  private readonly models: ModelStaging;
  private worker: Worker<RunPayload> | null = null;
  private health: Server | null = null;
  private healthPort = 0;
  private state: WorkerState = 'starting';
  private engineReady = false;
  private definitions: NodeDefinitions | null = null;
  private timers: NodeJS.Timeout[] = [];
  private stopping = false;

  constructor(private readonly config: Config) {
    this.id = config.worker.workerId || `${os.hostname()}-${process.pid}`;
    this.log = jsonLogger({ role: 'worker', worker_id: this.id }, config.logLevel);
    this.db = createPrismaClient(config.databaseUrl, 5, { preparedStatements: config.databasePreparedStatements });
    // Auto-pipelining: the many small writes of a run (events, v1 messages) share socket writes.
    // Commands wait for Redis to come back rather than fail: a restart must not fail the job that
    // happens to read its sealed extra data at that moment. (Periodic tasks do not pile up: a run
    // still waiting is skipped, and the readiness probe has its own deadline.)
    this.redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null, enableAutoPipelining: true });
    this.redis.on('error', () => undefined);
    this.subscriber = new Redis(config.redisUrl, { maxRetriesPerRequest: null });
    this.subscriber.on('error', () => undefined);
    const store = createBlobStore(config);
    this.storage = new StorageWriteProbe(store, config.readiness.storageProbeIntervalMs);
    this.engine = new EngineClient({ baseUrl: config.worker.engineUrl, stallTimeoutMs: config.worker.engineStallTimeoutMs, outputDir: config.worker.engineOutputDir });
    this.socket = new EngineSocket({ url: config.worker.engineUrl, clientId: `worker-${this.id}`, featureFlags: { supports_preview_metadata: true } });
    this.socket.on('error', () => undefined);
    this.system = createJobSystem({ config, db: this.db, redis: this.redis, store, role: 'worker' });
    const { keys } = this.system;
    const cacheLog = this.log.child({ component: 'model-cache' });
    this.models = {
      cache: new ModelCache(store, { ...config.worker.modelCache, log: (level, msg, fields) => cacheLog(level, msg, fields) }),
      modelsDir: config.worker.engineModelsDir,
    };
    this.runner = new JobRunner({
      db: this.db,
      jobs: this.system.jobs,
      redis: this.redis,
      store,
      engine: this.engine,
      socket: this.socket,
      events: this.system.events,
      leases: this.system.leases,
      vault: this.system.vault,
      keys,
      config,
      workerId: this.id,
      log: this.log,
      definitions: () => this.definitions,
      models: this.models,
    });
    const evictions = modelEvictionChannel(config.redisPrefix);
    this.subscriber.on('message', (channel, message: string) => {
      if (channel === keys.cancelChannel) this.runner.cancel(message);
      else if (channel === evictions) void this.evictIfDeleted([message]);
    });
    void this.subscriber.subscribe(keys.cancelChannel, ...(this.models.modelsDir ? [evictions] : [])).catch(() => undefined);
  }

  async start(): Promise<void> {
    const { server, port } = await startHealthServer(this.config.worker.host, this.config.worker.port, () => this.readiness(), this.metrics);
    this.health = server;
    this.healthPort = port;
    this.log('info', 'listening', { port });
    this.every(1000, () => this.heartbeat());
    this.every(SWEEP_EVERY_MS.worker, () => this.system.sweeper.sweep().then(() => undefined));
    this.every(1000, () => this.system.dispatcher.kick());
    await this.report();
    if (this.models.modelsDir) {
      await removeStagingFolders(this.models.modelsDir);
      await this.models.cache.open();
      // Announcements can be missed (a restart, a lost connection): deleted blobs are also looked for.
      this.every(this.config.worker.modelCache.checkSeconds * 1000, () => this.evictIfDeleted());
    }
    while (!(await this.engine.ready(1000))) {
      if (this.stopping) return;
      await new Promise((r) => setTimeout(r, 250));
    }
    this.engineReady = true;
    await this.publishDefinitions();
    this.every(30_000, () => this.publishDefinitions());
    this.socket.on('open', () => void this.engine.subscribeLogs(this.socket.clientId, true).catch(() => undefined));
    await this.socket.connect();
    await this.engine.subscribeLogs(this.socket.clientId, true).catch(() => undefined);
    const { keys } = this.system;
    this.worker = new Worker<RunPayload>(keys.queueName, (job) => this.process(job.data), {
      connection: { url: this.config.redisUrl, maxRetriesPerRequest: null } as never,
      prefix: keys.bullPrefix,
      concurrency: 1,
      maxStalledCount: 0,
      // A run whose worker died stays 'active' in BullMQ until its lock lapses; keep that short.
      lockDuration: 10_000,
      stalledInterval: 5_000,
    });
    this.worker.on('error', (err) => this.log('warn', 'queue error', { err: err.message }));
    this.state = 'idle';
    await this.report();
    await this.system.dispatcher.kick();
    // The health port again: whoever waits for "ready" also learns where /metrics and /readyz are.
    this.log('info', 'ready', { engine: this.config.worker.engineUrl, port: this.healthPort });
  }

  /**
   * Shares what the engine reports about itself: its node definitions, so the API validates
   * workflows against them, and its model and embedding names, which v1 clients list.
   */
  private async publishDefinitions(): Promise<void> {
    if (!this.engineReady) return;
    const { keys } = this.system;
    // Files staged for a running job show in the engine's model lists: no tenant may see them.
    const definitions = withoutStagedNames(await this.engine.objectInfo());
    this.definitions = definitions;
    if (await publishEngineReport(this.redis, keys.nodeDefinitions, definitions)) {
      this.log('info', 'published node definitions', { classes: Object.keys(definitions).length });
    }
    // Listing models is a convenience for v1 clients: an engine without these routes still runs jobs.
    try {
      await publishEngineReport(this.redis, keys.engineModels, await this.engineModels());
    } catch (err) {
      this.log('warn', 'could not list the engine models', { err: (err as Error).message });
    }
  }

  private async engineModels(): Promise<EngineModels> {
    const folders: Record<string, string[]> = {};
    // One folder at a time: a few small local reads every 30 s, never a burst at the engine.
    for (const folder of await this.engine.models()) folders[folder] = withoutStagedFiles(await this.engine.models(folder));
    return { embeddings: withoutStagedFiles(await this.engine.embeddings()), folders };
  }

  /**
   * Drops cached model files whose blobs are no longer stored (their last asset was deleted): the
   * hashes announced, or every cached one.
   */
  private async evictIfDeleted(hashes?: string[]): Promise<void> {
    const stored = async (list: string[]) => new Set((await this.db.blob.findMany({ where: { hash: { in: list } }, select: { hash: true } })).map((b) => b.hash));
    if (!hashes) {
      await this.models.cache.retainStored(stored);
      return;
    }
    const alive = await stored(hashes).catch(() => null);
    if (!alive) return;
    for (const hash of hashes) if (!alive.has(hash)) await this.models.cache.evict(hash).catch(() => undefined);
  }

  private async process(payload: RunPayload): Promise<void> {
    // State reports are for operators; scheduling reads BullMQ's counts, so nothing waits on them.
    this.state = 'busy';
    void this.report().catch(() => undefined);
    try {
      await this.runner.run(payload.jobId);
    } finally {
      // Until the heartbeat hears the engine again (and resumes the worker), no job is taken.
      if (this.runner.lostEngine && !this.stopping && this.engineReady) {
        this.engineReady = false;
        this.log('warn', 'engine not answering');
        void this.worker?.pause(true).catch(() => undefined);
      }
      this.state = this.stopping ? 'stopping' : 'idle';
      void this.report().catch(() => undefined);
      if (!this.stopping) void this.system.dispatcher.kick().catch(() => undefined);
    }
  }

  private every(ms: number, fn: () => Promise<void>): void {
    let running = false;
    this.timers.push(
      setInterval(() => {
        if (running) return;
        running = true;
        fn()
          .catch((err: unknown) => this.log('warn', 'periodic task failed', { err: (err as Error).message }))
          .finally(() => (running = false));
      }, ms),
    );
  }

  /** Reports state; an idle worker whose engine went away stops taking jobs until it is back. */
  private async heartbeat(): Promise<void> {
    if (this.state !== 'starting') {
      const up = await this.engine.ready(800);
      if (up !== this.engineReady) {
        this.engineReady = up;
        this.log(up ? 'info' : 'warn', up ? 'engine ready again' : 'engine not answering');
        if (this.worker && this.state === 'idle') {
          if (up) this.worker.resume();
          else await this.worker.pause(true);
        }
      }
    }
    await this.report();
  }

  private report(): Promise<void> {
    setEngineReady(this.id, this.engineReady);
    return this.system.registry.report({ id: this.id, state: this.state, jobId: this.runner.currentJobId, stage: this.runner.stage, engineReady: this.engineReady });
  }

  private async readiness(): Promise<Record<string, string>> {
    return {
      engine: this.engineReady ? 'ok' : 'error: engine not answering',
      postgres: await probe(() => this.db.$queryRaw`SELECT 1`),
      redis: await probe(() => this.redis.ping()),
      // Written to, not only reached: a full disk still answers reads, and outputs could not be stored.
      storage: await probe(() => this.storage.check()),
    };
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.state = 'stopping';
    await this.report().catch(() => undefined);
    this.runner.shutdown();
    await this.worker?.close();
    for (const t of this.timers) clearInterval(t);
    await this.system.registry.remove(this.id).catch(() => undefined);
    await this.socket.close().catch(() => undefined);
    await this.system.queue.close().catch(() => undefined);
    this.subscriber.disconnect();
    this.redis.disconnect();
    await this.db.$disconnect();
    this.health?.close();
    this.log('info', 'stopped');
  }
}
