import type { Server } from 'node:http';
import pg from 'pg';
import { createLogger, type Logger } from '#libs/logging';
import type { Config } from '#libs/config';
import { createPrismaClient, type Db } from '#libs/db';
import { JobStore } from '#libs/jobs';
import { ProcessMetrics, setOldestPendingWebhook } from '#libs/metrics';
import { startHealthServer } from '#libs/runtime';
import { createBlobStore } from '#libs/storage';
import { WAKE_CHANNEL } from '#libs/webhooks';
import { Deliverer } from './deliverer.js';
import { DeliveryStore } from './delivery-store.js';
import { Payloads } from './payload.js';

/**
 * The webhooks process: delivers the events the outbox holds, outside every request path, with
 * any number of replicas. It listens on PostgreSQL for the NOTIFY each new event sends at commit,
 * so a delivery starts within milliseconds of its job's change, and polls as a fallback (a
 * notification missed while the listening connection was down, a lease lapsed, a retry due).
 */
export class WebhooksProcess {
  private readonly log: Logger;
  private readonly db: Db;
  private readonly store: DeliveryStore;
  private readonly deliverer: Deliverer;
  private readonly metrics = new ProcessMetrics('webhooks');
  private listener: pg.Client | null = null;
  private listening = false;
  private health: Server | null = null;
  private poll: NodeJS.Timeout | null = null;
  private purge: NodeJS.Timeout | null = null;
  private relisten: NodeJS.Timeout | null = null;
  private stopping = false;

  constructor(private readonly config: Config) {
    this.log = createLogger({ base: { role: 'webhooks' }, level: config.logLevel, keepLifecycle: true });
    const w = config.webhooks;
    this.db = createPrismaClient(config.databaseUrl, w.concurrency + 2, { preparedStatements: config.databasePreparedStatements });
    this.store = new DeliveryStore(this.db, w.disableAfterSeconds);
    const payloads = new Payloads(new JobStore(this.db), createBlobStore(config), config);
    this.deliverer = new Deliverer(
      this.store,
      payloads,
      { signingSecret: config.signingSecret, policy: { allowLoopback: config.outboundAllowLoopback, requireHttps: config.env === 'production' }, timeoutMs: w.timeoutMs, maxResponseBytes: w.maxResponseBytes, retryScale: w.retryScale, concurrency: w.concurrency },
      this.log,
    );
    this.metrics.addCollector(async () => setOldestPendingWebhook(await this.store.oldestPendingSeconds()));
  }

  async start(): Promise<void> {
    const { server, port } = await startHealthServer(this.config.webhooks.host, this.config.webhooks.port, () => this.readiness(), this.metrics);
    this.health = server;
    this.log.info({ port }, 'listening');
    await this.listen();
    this.poll = setInterval(() => this.deliverer.wake(), this.config.webhooks.pollIntervalMs);
    // Test events are kept as long as jobs are (JOB_RETENTION_SECONDS); every replica may do it.
    this.purge = setInterval(() => {
      void this.store.purgeTestDeliveries(this.config.jobs.retentionSeconds).catch((err: Error) => this.log.warn({ err: err.message }, 'old test deliveries not deleted'));
    }, 60_000);
    // What is due already (events recorded while no deliverer ran) goes out now.
    this.deliverer.wake();
    this.log.info({ port, allow_loopback: this.config.outboundAllowLoopback }, 'ready');
  }

  /** LISTEN on its own connection (a pooled one could not keep it); on a break, again after a second. */
  private async listen(): Promise<void> {
    if (this.stopping) return;
    const client = new pg.Client({ connectionString: this.config.databaseUrl });
    this.listener = client;
    client.on('notification', () => this.deliverer.wake());
    client.on('error', (err) => {
      this.log.warn({ err: err.message }, 'webhook wake-up connection lost; polling until it is back');
      this.listening = false;
      void client.end().catch(() => undefined);
      this.relisten ??= setTimeout(() => {
        this.relisten = null;
        void this.listen();
      }, 1000);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${WAKE_CHANNEL}`);
      this.listening = true;
      // Events that came while it was not listening.
      this.deliverer.wake();
    } catch (err) {
      client.emit('error', err as Error);
    }
  }

  private async readiness(): Promise<Record<string, string>> {
    return {
      postgres: await this.postgresCheck(),
      // Deliveries still go out without it (the poll), only later than they should.
      listen: this.listening ? 'ok' : 'error: not listening for new events (polling meanwhile)',
    };
  }

  private async postgresCheck(): Promise<string> {
    try {
      await Promise.race([this.db.$queryRaw`SELECT 1`, new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2000))]);
      return 'ok';
    } catch (err) {
      return `error: ${(err as Error).message.slice(0, 100)}`;
    }
  }

  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    if (this.poll) clearInterval(this.poll);
    if (this.purge) clearInterval(this.purge);
    if (this.relisten) clearTimeout(this.relisten);
    await this.deliverer.stop();
    await this.listener?.end().catch(() => undefined);
    await this.db.$disconnect();
    this.health?.close();
    this.log.info('stopped');
  }
}
