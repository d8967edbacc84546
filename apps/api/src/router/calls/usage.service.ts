import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationShutdown, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { CHARGE_REASONS, chargeCtes } from '#libs/accounts';
import { executeStatement, Prisma, type Db } from '#libs/db';
import { routerCallObserved } from '#libs/metrics';
import { componentLogger } from '#libs/logging';
import { DB } from '../../core/tokens.js';
import type { GenerationResult } from '../adapters/index.js';

// Usage and audit: one router_calls row per call (request id, workspace, model, outcome bucket,
// duration, charged). A dispatched call's row is written as `running` first (keyed calls before
// dispatch, others in the next batch), so a replica that dies mid-call leaves its calls on record.
// A charge is a ledger entry (reason router_call, ref = the call id, unique, so a generation is
// never charged twice) and the balance moves in the same statement. Credits are US cents: a call
// is charged its model's price.

export const CHARGE_REASON = CHARGE_REASONS.routerCall;

export interface FinalRecord {
  id: string;
  accountId: string;
  modelId: string;
  outcome: string;
  resultBucket: string | null;
  httpStatus: number;
  costCents: number;
  charged: boolean;
  durationMs: number;
  /** Epoch ms the call arrived. */
  startedAt: number;
  providerHandle?: string | null;
  replayOf?: string | null;
}

export interface KeyedRow {
  id: string;
  accountId: string;
  modelId: string;
  idempotencyKey: string | null;
  requestHash: string | null;
  state: string;
  resultBucket: string | null;
  httpStatus: number | null;
  responseType: string | null;
  responseBody: Uint8Array | null;
  providerHandle: string | null;
  costCents: number;
  createdAt: Date;
  completedAt: Date | null;
}

// Final records are written in batches: one statement per batch (records, ledger entries and
// balances together) keeps the database off the calls' critical path and its pool free for the
// reads calls do wait on.
const BATCH_MAX = 500;
/**
 * How long after its model's provider deadline a keyed call still `running` may yet be finished by
 * a live replica (its result stored, with retries); past it, its replica is presumed dead.
 */
export const LOST_CALL_GRACE_MS = 30_000;
const LOST_SWEEP_EVERY_MS = 5_000;
// The deadline of a row whose model has left the catalog: the longest one, or the default.
const DEFAULT_TIMEOUT_MS = 300_000;
const BATCH_DELAY_MS = 20;
const FLUSH_ATTEMPTS = 6;
// Records of refused calls kept while the database refuses writes; past this, they are counted
// and dropped (calls are not dispatched meanwhile, so nothing charged is among them).
const MAX_WAITING_REFUSALS = 100_000;

/** The wait before another try of a write the database refused: 400 ms, doubling each time, at most 2 s. */
function retryDelayMs(attempt: number): number {
  return Math.min(2_000, 200 * 2 ** attempt);
}

/** A row to write: a call that ended, or (state running) an unkeyed call just dispatched. */
type UsageRow = FinalRecord & { state: 'completed' | 'running' };

interface Queued {
  record: UsageRow;
  done: () => void;
}

@Injectable()
export class UsageService implements OnModuleInit, OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = componentLogger('RouterUsage');
  private readonly pending = new Set<Promise<unknown>>();
  private queue: Queued[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  private sweepTimer: NodeJS.Timeout | null = null;
  /** Whether the last try to write a batch failed; cleared by the next that succeeds. */
  private failing = false;
  private waitingRefusals = 0;
  private droppedRefusals = 0;
  private stopping = false;

  constructor(@Inject(DB) private readonly db: Db) {}

  onModuleInit(): void {
    this.sweepTimer = setInterval(() => void this.abandonLost().catch((err: Error) => this.logger.warn(`sweep of lost calls failed: ${err.message}`)), LOST_SWEEP_EVERY_MS);
    this.sweepTimer.unref();
  }

  onModuleDestroy(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  /** Writes that outlive their request are tracked so a shutdown waits for them. */
  track<T>(promise: Promise<T>, what: string): void {
    const tracked = promise.catch((err: Error) => this.logger.error(`${what} failed: ${err.message}`));
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopping = true;
    this.flushSoon(0);
    await Promise.allSettled([...this.pending]);
    await this.flushing;
  }

  /** The record of a call that ends here (and its charge); resolves once it is stored. */
  insertFinal(record: FinalRecord): Promise<void> {
    routerCallObserved(record.modelId, record.outcome, record.durationMs / 1000);
    return this.enqueue({ ...record, state: 'completed' });
  }

  /**
   * The `running` row of an unkeyed call being dispatched, written with the next batch; its final
   * record completes it. Should the replica die first, the sweep of lost calls ends it.
   */
  recordStart(call: { id: string; accountId: string; modelId: string; costCents: number; startedAt: number }): void {
    const row: UsageRow = { ...call, state: 'running', outcome: '', resultBucket: null, httpStatus: 0, charged: false, durationMs: 0 };
    this.track(this.enqueue(row), `usage record ${call.id}`);
  }

  private enqueue(record: UsageRow): Promise<void> {
    return new Promise<void>((resolve) => {
      this.queue.push({ record, done: resolve });
      this.flushSoon(this.queue.length >= BATCH_MAX ? 0 : BATCH_DELAY_MS);
    });
  }

  /**
   * The record of a call that ended before anything was dispatched (refused, or failed inside the
   * router): nothing charged. Written with the next batch; the caller does not wait for it.
   */
  recordUndispatched(call: { id: string; accountId: string; modelId: string; outcome: string; httpStatus: number; startedAt: number }): void {
    if (this.waitingRefusals >= MAX_WAITING_REFUSALS) {
      if (this.droppedRefusals++ % 10_000 === 0) this.logger.error(`usage records of refused calls dropped while the database refuses writes: ${this.droppedRefusals} so far`);
      return;
    }
    const record: FinalRecord = { ...call, resultBucket: null, costCents: 0, charged: false, durationMs: Date.now() - call.startedAt };
    this.waitingRefusals++;
    this.track(
      this.insertFinal(record).finally(() => this.waitingRefusals--),
      `usage record ${call.id}`,
    );
  }

  /**
   * Whether call records reach the database. While they do not, no call is dispatched: its record
   * and charge could only wait in this process's memory, and be lost with it.
   */
  recording(): boolean {
    return !this.failing;
  }

  private flushSoon(delay: number): void {
    if (this.timer && delay > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      const batch = this.queue.splice(0, this.queue.length);
      if (batch.length === 0) return;
      // One batch at a time: under load the next one simply grows while this one is written.
      this.flushing = this.flushing.then(() => this.writeBatch(batch));
    }, delay);
  }

  /** Tries until the database takes the batch; only a stopping process gives up, and logs the records whole. */
  private async writeBatch(batch: Queued[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.insertMany(batch.map((q) => q.record));
        this.failing = false;
        break;
      } catch (err) {
        this.failing = true;
        const reason = (err as Error).message;
        if (this.stopping && attempt >= FLUSH_ATTEMPTS) {
          this.logger.error(`${batch.length} usage records could not be written before the stop: ${reason}; records ${JSON.stringify(batch.map((q) => q.record))}`);
          break;
        }
        this.logger.warn(`${batch.length} usage records not written yet (try ${attempt}), trying again: ${reason}`);
        await sleep(retryDelayMs(attempt));
      }
    }
    for (const q of batch) q.done();
  }

  private async insertMany(records: UsageRow[]): Promise<void> {
    // A call that ended within the batch delay has its start and its end in one batch: one row
    // each, the end (queued later) kept. A statement may not write one row twice.
    const latest = new Map(records.map((r) => [r.id, r]));
    const rows = JSON.stringify(
      [...latest.values()].map((r) => ({
        id: r.id,
        account_id: r.accountId,
        model_id: r.modelId,
        state: r.state,
        outcome: r.state === 'completed' ? r.outcome : null,
        result_bucket: r.resultBucket,
        http_status: r.state === 'completed' ? r.httpStatus : null,
        provider_handle: r.providerHandle ?? null,
        cost_cents: r.costCents,
        charged: r.charged,
        duration_ms: r.state === 'completed' ? r.durationMs : null,
        replay_of: r.replayOf ?? null,
        created_at: new Date(r.startedAt).toISOString(),
      })),
    );
    // Re-running a batch is harmless: records and charges are keyed by the call id, and a row
    // already completed is not written again (nor charged again). An end completes its call's
    // running row, also one the sweep has abandoned meanwhile; never a keyed call's own row.
    // Straight on the pool, like the other statements on a call's path. At 64 callers a batch waits
    // while the one before it is written, and Prisma's handling of this statement was about a sixth
    // of what the API kept past its scavenges, to be freed by full collections (docs/performance.md).
    await executeStatement(
      this.db,
      Prisma.sql`
      WITH r AS (
        SELECT * FROM json_to_recordset(${rows}::json) AS x(id text, account_id uuid, model_id text, state text, outcome text, result_bucket text,
          http_status int, provider_handle text, cost_cents int, charged boolean, duration_ms int, replay_of text, created_at timestamptz)
      ), call AS (
        INSERT INTO router_calls AS c (id, account_id, model_id, state, outcome, result_bucket, http_status, provider_handle, cost_cents, charged, duration_ms, replay_of, created_at, completed_at)
        SELECT id, account_id, model_id, state, outcome, result_bucket, http_status, provider_handle, cost_cents, charged, duration_ms, replay_of, created_at,
          CASE WHEN state = 'completed' THEN now() END FROM r
        ON CONFLICT (id) DO UPDATE SET state = excluded.state, outcome = excluded.outcome, result_bucket = excluded.result_bucket,
          http_status = excluded.http_status, provider_handle = excluded.provider_handle, charged = excluded.charged,
          duration_ms = excluded.duration_ms, completed_at = excluded.completed_at
        WHERE excluded.state = 'completed' AND c.state <> 'completed' AND c.idempotency_key IS NULL AND c.request_hash IS NULL
        RETURNING c.id, c.account_id, c.cost_cents, c.charged
      ), ${chargeCtes(Prisma.sql`SELECT account_id, -cost_cents::bigint, ${CHARGE_REASON}, id FROM call WHERE charged`)}
      SELECT count(*) FROM balance`,
    );
  }

  /** A keyed call's row, before dispatch; false when another call holds the key already. */
  async insertKeyed(r: { id: string; accountId: string; modelId: string; key: string; requestHash: string; costCents: number }): Promise<boolean> {
    const rows = await this.db.$queryRaw<{ id: string }[]>`
      INSERT INTO router_calls (id, account_id, model_id, idempotency_key, request_hash, state, cost_cents)
      VALUES (${r.id}, ${r.accountId}::uuid, ${r.modelId}, ${r.key}, ${r.requestHash}, 'running', ${r.costCents})
      ON CONFLICT (account_id, idempotency_key) DO NOTHING
      RETURNING id`;
    return rows.length === 1;
  }

  /** Removes a keyed call's row that was never dispatched: the key is free again, and the id free for the call's final record. */
  async withdrawKeyed(id: string): Promise<void> {
    await this.db.routerCall.deleteMany({ where: { id, state: 'running', providerHandle: null } });
  }

  async findByKey(accountId: string, key: string): Promise<KeyedRow | null> {
    return this.db.routerCall.findUnique({ where: { accountId_idempotencyKey: { accountId, idempotencyKey: key } } });
  }

  async find(id: string): Promise<KeyedRow | null> {
    return this.db.routerCall.findUnique({ where: { id } });
  }

  async setHandle(id: string, handle: string): Promise<void> {
    await this.db.routerCall.updateMany({ where: { id, state: 'running' }, data: { providerHandle: handle } });
  }

  /** Lets the key go (the row stays as the audit record): the next call with it dispatches anew. */
  async freeKey(id: string): Promise<boolean> {
    const done = await this.db.routerCall.updateMany({ where: { id }, data: { idempotencyKey: null } });
    return done.count === 1;
  }

  /**
   * Ends the rows of keyed calls whose replica died mid-call: still `running` past their model's
   * deadline and LOST_CALL_GRACE_MS, nothing can finish them. Each becomes `abandoned` (see
   * `abandon`). The sweep runs on every replica; the update is the same whoever runs it.
   */
  async abandonLost(): Promise<number> {
    return this.db.$executeRaw`
      UPDATE router_calls c
      SET state = 'abandoned', completed_at = now(), idempotency_key = NULL, outcome = 'internal_error'
      WHERE c.state = 'running'
        AND c.created_at < now() - make_interval(secs => (coalesce(
          (SELECT m.timeout_ms FROM router_models m WHERE m.id = c.model_id),
          (SELECT max(m.timeout_ms) FROM router_models m),
          ${DEFAULT_TIMEOUT_MS}) + ${LOST_CALL_GRACE_MS}) / 1000.0)`;
  }

  /**
   * A lost call's row: its key freed (the next call with it dispatches anew), recorded as the
   * router failing the call (`internal_error`: its caller got no answer), with no duration (its
   * end is not known). It was never charged.
   */
  async abandon(id: string): Promise<void> {
    await this.db.routerCall.updateMany({ where: { id, state: 'running' }, data: { state: 'abandoned', completedAt: new Date(), idempotencyKey: null, outcome: 'internal_error' } });
  }

  /**
   * Stores a keyed generation's result once (first writer wins) and charges it; returns false when
   * another collector stored it first. The result is stored whatever it is: duplicates waiting on
   * the row on other replicas take it from there. `keepKey` says whether later retries get it too.
   */
  async completeGeneration(id: string, accountId: string, result: GenerationResult, costCents: number, charged: boolean, keepKey: boolean): Promise<boolean> {
    const amount = -BigInt(costCents);
    const rows = await this.db.$queryRaw<{ updated: number }[]>`
      WITH done AS (
        UPDATE router_calls SET state = 'completed', result_bucket = ${result.bucket}, http_status = ${result.status},
          response_type = ${result.contentType}, response_body = ${result.body}, charged = ${charged},
          completed_at = now(), idempotency_key = CASE WHEN ${keepKey} THEN idempotency_key ELSE NULL END
        WHERE id = ${id} AND state = 'running'
        RETURNING id
      ), ${chargeCtes(Prisma.sql`SELECT ${accountId}::uuid, ${amount}, ${CHARGE_REASON}, id FROM done WHERE ${charged}`)}
      SELECT (SELECT count(*) FROM done)::int AS updated, (SELECT count(*) FROM balance)::int AS charged`;
    return (rows[0]?.updated ?? 0) === 1;
  }

  /**
   * completeGeneration, tried again with backoff while the database refuses it (as the batches
   * are); the caller keeps the generation joinable until this returns. Null when every try failed:
   * the row stays running, and a retry of its key collects the generation or waits the row out.
   */
  async storeGeneration(id: string, accountId: string, result: GenerationResult, costCents: number, charged: boolean, keepKey: boolean): Promise<boolean | null> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.completeGeneration(id, accountId, result, costCents, charged, keepKey);
      } catch (err) {
        const reason = (err as Error).message;
        if (attempt >= FLUSH_ATTEMPTS) {
          this.logger.error(`result of ${id} could not be stored: ${reason}`);
          return null;
        }
        this.logger.warn(`result of ${id} not stored yet (try ${attempt} of ${FLUSH_ATTEMPTS}), trying again: ${reason}`);
        await sleep(retryDelayMs(attempt));
      }
    }
  }

  /** What the caller of a keyed call received, once it is known. */
  async setOutcome(id: string, outcome: string, durationMs: number): Promise<void> {
    await this.db.routerCall.update({ where: { id }, data: { outcome, durationMs } });
  }
}
