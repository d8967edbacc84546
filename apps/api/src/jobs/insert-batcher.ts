import type { Db, Job } from '#libs/db';
import { jobColumns, jobFromRow } from '#libs/jobs';

export interface NewJobRow {
  id: string;
  accountId: string;
  /** What the worker runs: file names resolved to asset references. */
  workflow: unknown;
  /** The workflow as the client sent it, when that is not `workflow`. */
  submittedWorkflow?: unknown;
  outputNodes: string[];
  source: string;
  clientId: string | null;
  deploymentId: string | null;
  expiresAt: Date;
  queueDeadlineAt: Date;
  /** Cancel-After: the job's own deadline, or null. */
  deadlineAt?: Date | null;
  idempotencyKey: string | null;
  /** Set with idempotencyKey: what a later use of the key is compared with. */
  requestHash: string | null;
  idempotencyExpiresAt: Date;
  maxQueued: number;
  /** The assets the workflow references (lower-case ids), already checked to be the account's. */
  assetIds?: string[];
}

export type InsertResult =
  | { kind: 'created'; job: Job }
  | { kind: 'queue_full' }
  | { kind: 'key_taken' }
  | { kind: 'id_taken' }
  | { kind: 'missing_asset'; assetIds: string[] };

const MAX_BATCH = 200;

interface Pending {
  row: NewJobRow;
  resolve: (r: InsertResult) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit for submissions: the jobs of all requests that arrive in the same turn of the
 * event loop are inserted by one statement, with each account's queue limit and each idempotency
 * key checked inside it. On this kind of machine a round trip to PostgreSQL costs more than the
 * work it carries, so one statement per batch instead of one per request is what lets the API
 * take thousands of submissions a second.
 */
export class InsertBatcher {
  private pending: Pending[] = [];
  private scheduled = false;

  constructor(private readonly db: Db) {}

  insert(row: NewJobRow): Promise<InsertResult> {
    return new Promise((resolve, reject) => {
      this.pending.push({ row, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, MAX_BATCH);
    this.scheduled = this.pending.length > 0;
    if (this.scheduled) setImmediate(() => void this.flush());
    if (batch.length === 0) return;
    try {
      const results = await this.run(batch.map((p) => p.row));
      batch.forEach((p, i) => p.resolve(results[i]!));
    } catch (err) {
      if (batch.length === 1) {
        batch[0]!.reject(err);
        return;
      }
      // A batch that failed as a whole (say a concurrent statement took an id first) is retried
      // row by row, so one bad row cannot fail its neighbours.
      for (const p of batch) this.run([p.row]).then((r) => p.resolve(r[0]!), p.reject);
    }
  }

  private async run(rows: NewJobRow[]): Promise<InsertResult[]> {
    const input = JSON.stringify(
      rows.map((r, i) => ({
        i,
        id: r.id,
        account_id: r.accountId,
        workflow: r.workflow,
        submitted_workflow: r.submittedWorkflow ?? null,
        output_nodes: r.outputNodes,
        source: r.source,
        client_id: r.clientId,
        deployment_id: r.deploymentId,
        expires_at: r.expiresAt.toISOString(),
        queue_deadline_at: r.queueDeadlineAt.toISOString(),
        deadline_at: r.deadlineAt?.toISOString() ?? null,
        idem_key: r.idempotencyKey,
        request_hash: r.requestHash,
        idem_expires_at: r.idempotencyExpiresAt.toISOString(),
        max_queued: r.maxQueued,
        asset_ids: r.assetIds ?? [],
      })),
    );
    const out = await this.db.$queryRaw<(Record<string, unknown> & { i: number; has_room: boolean; id_free: boolean; missing: string[]; created: boolean })[]>`
      WITH input AS (
        SELECT * FROM json_to_recordset(${input}::json) AS x(
          i int, id uuid, account_id uuid, workflow jsonb, submitted_workflow jsonb, output_nodes text[], source text, client_id text,
          deployment_id text, expires_at timestamptz, queue_deadline_at timestamptz, deadline_at timestamptz, idem_key text,
          request_hash text, idem_expires_at timestamptz, max_queued int, asset_ids uuid[])
      ), held AS MATERIALIZED (
        -- The assets the jobs use, share-locked until this batch commits. A deletion locks its
        -- asset before it looks for live jobs using it: it waits for this batch and sees its jobs,
        -- or this waits for the deletion and finds the asset gone. Never a job without its asset.
        SELECT a.id, a.account_id FROM assets a
        WHERE a.id = ANY (ARRAY(SELECT unnest(asset_ids) FROM input))
          AND (a.expires_at IS NULL OR a.expires_at > now())
        FOR SHARE
      ), counts AS (
        -- Each account's queue counts (kept by triggers on jobs), locked until this batch commits:
        -- batches of one account, from any replica, check the queue limit one after another, and
        -- ON CONFLICT reads the latest committed counts, so each sees the jobs the previous added.
        -- Accounts are locked in id order, as the triggers do.
        INSERT INTO job_queue_counts AS c (account_id)
        SELECT DISTINCT account_id FROM input ORDER BY account_id
        ON CONFLICT (account_id) DO UPDATE SET waiting = c.waiting
        RETURNING account_id, waiting + handed AS queued
      ), ranked AS (
        SELECT input.*, coalesce(c.queued, 0) + row_number() OVER (PARTITION BY input.account_id ORDER BY input.i) <= input.max_queued AS has_room,
               taken.id IS NULL AS id_free, refs.missing
        FROM input LEFT JOIN counts c ON c.account_id = input.account_id
        LEFT JOIN LATERAL (
          SELECT coalesce(array_agg(want.id) FILTER (WHERE h.id IS NULL), '{}') AS missing
          FROM unnest(input.asset_ids) AS want(id) LEFT JOIN held h ON h.id = want.id AND h.account_id = input.account_id
        ) refs ON true
        -- One primary-key probe per row. Written as NOT EXISTS, the planner (guessing 100 input
        -- rows) hashed the ids of the whole jobs table instead, on every batch. OFFSET 0 keeps the
        -- lookup from being flattened into a join it could plan the same way.
        LEFT JOIN LATERAL (SELECT j.id FROM jobs j WHERE j.id = input.id OFFSET 0) taken ON true
      ), idem AS (
        INSERT INTO idempotency_records (account_id, key, request_hash, job_id, expires_at)
        SELECT account_id, idem_key, request_hash, id, idem_expires_at FROM ranked
        WHERE has_room AND id_free AND cardinality(missing) = 0 AND idem_key IS NOT NULL
        ON CONFLICT (account_id, key) DO NOTHING
        RETURNING job_id
      ), job AS (
        INSERT INTO jobs (id, account_id, workflow, submitted_workflow, output_nodes, source, client_id, deployment_id, expires_at, queue_deadline_at, deadline_at)
        SELECT id, account_id, workflow, submitted_workflow, output_nodes, source, client_id, deployment_id, expires_at, queue_deadline_at, deadline_at FROM ranked
        WHERE has_room AND id_free AND cardinality(missing) = 0 AND (idem_key IS NULL OR id IN (SELECT job_id FROM idem))
        RETURNING ${jobColumns()}
      )
      SELECT r.i, r.has_room, r.id_free, r.missing::text[] AS missing, job.id IS NOT NULL AS created, job.*
      FROM ranked r LEFT JOIN job ON job.id = r.id
      ORDER BY r.i`;
    return out.map((row) => {
      if (row.created) {
        const { i: _i, has_room: _h, id_free: _f, missing: _m, created: _c, ...jobRow } = row;
        return { kind: 'created', job: jobFromRow(jobRow) };
      }
      if (row.missing.length > 0) return { kind: 'missing_asset', assetIds: row.missing };
      if (!row.has_room) return { kind: 'queue_full' };
      if (!row.id_free) return { kind: 'id_taken' };
      return { kind: 'key_taken' };
    });
  }
}
