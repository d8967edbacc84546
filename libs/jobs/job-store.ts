import { CHARGE_REASONS, chargeCtes } from '#libs/accounts';
import { parseLosslessJson, TERMINAL_STATUSES } from '#libs/contracts';
import { Prisma, queryRows, type Db, type Job, type JobStatus } from '#libs/db';
import { jobStatusEventsCte } from '#libs/webhooks';
import { inScope, scopeWhere, type JobScope } from './job-scope.js';
import type { JobWithOutputs } from './job-view.js';
import { queuePositions, queuePositionsOf } from './positions.js';
import { canTransition, endedJobColumns, endedJobFromPoolRow, jobColumns, jobColumnsButWorkflows, jobFromPoolRow, jobFromRow, type EndedJob, type Outcome, type RunLease } from './state.js';

// The one owner of the `jobs` table (and of the queue counts its triggers keep): every statement
// that reads or writes jobs is a method here, whichever process runs it (API, worker, webhooks).
// The rules that protect a job (guarded transitions, the lease of a run, queue limits and
// idempotency checked inside the insert, a charge committed with the ending) live beside the SQL
// that enforces them, and services get them through this one object (a fake of it in unit tests).

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

/** A job's log as captured, for v1's log routes. */
export interface JobLog {
  logText: string | null;
  logCapturedAt: Date | null;
}

/** What the v1 socket reports of a job. */
export type SocketJob = Pick<Job, 'id' | 'status' | 'error' | 'progress' | 'startedAt' | 'completedAt' | 'updatedAt' | 'attempts' | 'deploymentId'>;

/** One page of the caller's jobs, newest first; `after` is the last job of the previous page. */
export interface JobPageQuery {
  limit: number;
  statuses: JobStatus[] | null;
  after: { t: string; id: string } | null;
}

/** A job past a deadline, as the sweeper expires it. */
export interface LateJob {
  id: string;
  account_id: string;
  /** Late for its queue deadline (never started), not for its run deadline. */
  in_queue: boolean;
  /** The deadline passed is the job's own (Cancel-After). */
  own_deadline: boolean;
}

const IN_FLIGHT: JobStatus[] = ['queued', 'running', 'canceling'];

/** The job with its outputs' assets and blobs, as Prisma reads them (webhooks, v1 history). */
export const WITH_OUTPUTS = { outputs: { include: { asset: { include: { blob: true } } }, orderBy: { id: 'asc' as const } } };

/** A job's outputs with their assets and blobs, as one JSON array column of the job's row. */
const OUTPUTS_OF_J = Prisma.sql`(
  SELECT coalesce(json_agg(json_build_object(
    'id', o.id, 'job_id', o.job_id, 'asset_id', o.asset_id, 'node_id', o.node_id, 'type', o.type,
    'engine_key', o.engine_key, 'engine_type', o.engine_type, 'name', o.name,
    'blob_hash', a.blob_hash, 'content_type', a.content_type, 'file_path', a.file_path, 'size_bytes', b.size_bytes,
    'expires_at', a.expires_at
  ) ORDER BY o.id), '[]')
  FROM job_outputs o
  LEFT JOIN assets a ON a.id = o.asset_id
  LEFT JOIN blobs b ON b.hash = a.blob_hash
  WHERE o.job_id = j.id) AS outputs_json`;

type JobRowWithOutputs = Record<string, unknown> & { outputs_json: OutputRow[] };

interface OutputRow {
  id: number;
  job_id: string;
  asset_id: string;
  node_id: string;
  type: string;
  engine_key: string;
  engine_type: string;
  name: string;
  blob_hash: string;
  content_type: string;
  file_path: string;
  size_bytes: number;
  /** The asset's retention (json_build_object writes timestamps as ISO text); null: kept. */
  expires_at: string | null;
}

function withOutputs(row: JobRowWithOutputs): JobWithOutputs {
  const { outputs_json: outputs, ...jobRow } = row;
  return { ...jobFromRow(jobRow), outputs: outputs.map(outputFromRow) };
}

/** An output row of the one-query read in the shape `renderOutput` takes. */
function outputFromRow(o: OutputRow): JobWithOutputs['outputs'][number] {
  return {
    id: BigInt(o.id),
    jobId: o.job_id,
    assetId: o.asset_id,
    nodeId: o.node_id,
    type: o.type,
    engineKey: o.engine_key,
    engineType: o.engine_type,
    name: o.name,
    asset: {
      blobHash: o.blob_hash,
      contentType: o.content_type,
      filePath: o.file_path,
      expiresAt: o.expires_at === null ? null : new Date(o.expires_at),
      blob: { sizeBytes: BigInt(o.size_bytes) },
    },
  } as unknown as JobWithOutputs['outputs'][number];
}

function isNotFound(err: unknown): boolean {
  return (err as { code?: string }).code === 'P2025';
}

/** The statements on `jobs`; see the top of this file. */
export class JobStore {
  constructor(private readonly db: Db) {}

  // --- Lifecycle: insert, claim, transitions, ending -------------------------------------------

  /**
   * Inserts a batch of new jobs in one statement, each account's queue limit and each idempotency
   * key checked inside it (InsertBatcher gathers the batches). One result per row, in order.
   */
  async insertMany(rows: NewJobRow[]): Promise<InsertResult[]> {
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
    const out = await queryRows<Record<string, unknown> & { i: number; has_room: boolean; id_free: boolean; missing: string[]; created: boolean }>(this.db, Prisma.sql`
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
        RETURNING ${jobColumnsButWorkflows()}
      )
      SELECT r.i, r.has_room, r.id_free, r.missing::text[] AS missing, job.id IS NOT NULL AS created, job.*
      FROM ranked r LEFT JOIN job ON job.id = r.id
      ORDER BY r.i`);
    return out.map((row) => {
      if (row.created) {
        const { i, has_room: _h, id_free: _f, missing: _m, created: _c, ...jobRow } = row;
        const sent = rows[i]!;
        return { kind: 'created', job: jobFromPoolRow(jobRow, sent.workflow, sent.submittedWorkflow) };
      }
      if (row.missing.length > 0) return { kind: 'missing_asset', assetIds: row.missing };
      if (!row.has_room) return { kind: 'queue_full' };
      if (!row.id_free) return { kind: 'id_taken' };
      return { kind: 'key_taken' };
    });
  }

  /**
   * Moves a job from one of `from` to `to` in one guarded UPDATE: when two actors race (a cancel and
   * a success, a retry and a cancel), the database decides and the loser gets null. `tx`: inside a
   * caller's transaction.
   */
  async transition(
    jobId: string,
    from: JobStatus[],
    to: JobStatus,
    patch: Prisma.JobUpdateInput = {},
    guard: { workerId?: string; attempts?: number } = {},
    tx?: Prisma.TransactionClient,
  ): Promise<Job | null> {
    const allowedFrom = from.filter((f) => canTransition(f, to));
    if (allowedFrom.length === 0) return null;
    try {
      return await (tx ?? this.db).job.update({ where: { id: jobId, status: { in: allowedFrom }, ...guard }, data: { ...patch, status: to } });
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  /**
   * Ends a job: the terminal transition and the charge for the engine's time happen in one SQL
   * statement, so they commit together or not at all, and the ledger's unique (reason, ref) means
   * a job is never charged twice. (One statement rather than an interactive transaction: it holds
   * no connection between round trips, which matters on the hot path of every job.)
   */
  async finish(jobId: string, outcome: Outcome, creditsPerSecond: number, now = new Date(), guard: Partial<RunLease> = {}): Promise<EndedJob | null> {
    const terminal = outcome.status === 'canceled' || outcome.status === 'expired' || outcome.status === 'failed' || outcome.status === 'succeeded';
    // Any ending of a canceling job makes it canceled (below), so canceling is always a start.
    const from = terminal ? (['running', 'canceling', 'queued'] as JobStatus[]).filter((f) => f === 'canceling' || canTransition(f, outcome.status)) : [];
    if (from.length === 0) return null;
    const error = outcome.error ? JSON.stringify(outcome.error) : null;
    const log = outcome.log ?? null;
    const progress = outcome.progress ? JSON.stringify(outcome.progress) : null;
    const engineMs = Math.max(0, Math.round(outcome.engineMs ?? 0));
    const engineMessages = outcome.engineMessages ? JSON.stringify(outcome.engineMessages) : null;
    // On the pool (queryRows): the job's waiters and webhooks wait for this statement.
    const rows = await queryRows<Record<string, unknown>>(this.db, Prisma.sql`
      WITH done AS (
        UPDATE jobs SET
          status = CASE WHEN status = 'canceling' THEN 'canceled' ELSE ${outcome.status}::"JobStatus" END,
          completed_at = ${now},
          execution_ms = CASE WHEN started_at IS NULL THEN NULL
                              ELSE greatest(0, floor(extract(epoch FROM (${now}::timestamptz - started_at)) * 1000))::int END,
          -- A job that ends without ever starting (canceled or expired in the queue) waited all its life.
          queue_ms = CASE WHEN started_at IS NULL AND queue_ms IS NULL
                          THEN greatest(0, floor(extract(epoch FROM (${now}::timestamptz - created_at)) * 1000))::int ELSE queue_ms END,
          error = CASE WHEN status = 'canceling' THEN error ELSE coalesce(${error}::jsonb, error) END,
          progress = coalesce(${progress}::jsonb, progress),
          engine_messages = coalesce(${engineMessages}::jsonb, engine_messages),
          billed_ms = billed_ms + ${engineMs},
          charged_credits = CASE WHEN ${outcome.free === true} THEN 0
                                 ELSE ceil((billed_ms + ${engineMs}) / 1000.0)::bigint * ${creditsPerSecond} END,
          log_text = CASE WHEN ${log !== null} THEN ${log?.text ?? null} ELSE log_text END,
          log_truncated = CASE WHEN ${log !== null} THEN ${log?.truncated ?? false} ELSE log_truncated END,
          log_captured_at = CASE WHEN ${log !== null} THEN ${now}::timestamptz ELSE log_captured_at END,
          updated_at = ${now}
        WHERE id = ${jobId}::uuid
          AND status = ANY(${from}::"JobStatus"[])
          AND (${guard.workerId ?? null}::text IS NULL OR worker_id = ${guard.workerId ?? null})
          AND (${guard.attempt ?? null}::int IS NULL OR attempts = ${guard.attempt ?? null})
        RETURNING ${endedJobColumns()}
      ), ${chargeCtes(Prisma.sql`SELECT account_id, -charged_credits, ${CHARGE_REASONS.job}, id::text FROM done WHERE charged_credits > 0`)},
      ${jobStatusEventsCte(Prisma.sql`done`)}
      SELECT * FROM done`);
    return rows[0] ? endedJobFromPoolRow(rows[0]) : null;
  }

  /**
   * A worker takes a queued job: running, on this worker, with its engine prompt id, one more
   * attempt, and (first time only) its start, queue wait and run deadline. One statement; null when
   * the job is no longer queued (canceled or expired while it waited), or has waited past its queue
   * deadline: such a job is the sweeper's to expire, whichever comes first. The queue deadline
   * bounds the wait before the first start only; a job handed back after its worker vanished runs
   * again under its run deadline.
   */
  async claim(jobId: string, claim: { workerId: string; enginePromptId: string; executionTimeoutSeconds: number }): Promise<{ job: Job; firstStart: boolean } | null> {
    // On the pool (queryRows): the worker waits for this statement before anything else of the run.
    const rows = await queryRows<Record<string, unknown> & { first_start: boolean; workflow_text: string; submitted_text: string | null }>(this.db, Prisma.sql`
      WITH claimed AS (
      UPDATE jobs SET
        status = 'running',
        worker_id = ${claim.workerId},
        engine_prompt_id = ${claim.enginePromptId},
        attempts = attempts + 1,
        started_at = coalesce(started_at, now()),
        queue_ms = coalesce(queue_ms, greatest(0, floor(extract(epoch FROM (now() - created_at)) * 1000))::int),
        -- A job's own deadline (Cancel-After) bounds its run as well.
        run_deadline_at = coalesce(run_deadline_at, least(now() + make_interval(secs => ${claim.executionTimeoutSeconds}), deadline_at)),
        updated_at = now()
      WHERE id = ${jobId}::uuid AND status = 'queued'
        AND (attempts > 0 OR queue_deadline_at IS NULL OR queue_deadline_at > now())
      RETURNING ${jobColumnsButWorkflows()}, (attempts = 1) AS first_start, workflow::text AS workflow_text, submitted_workflow::text AS submitted_text
      ), ${jobStatusEventsCte(Prisma.sql`claimed`)}
      SELECT * FROM claimed`);
    const row = rows[0];
    if (!row) return null;
    const { first_start: firstStart, workflow_text: workflowText, submitted_text: submittedText, ...job } = row;
    // Read from their text only (not as jsonb too: a real workflow is tens of kilobytes): integers
    // beyond 2^53 (seeds) reach the engine with every digit.
    return { job: jobFromPoolRow(job, parseLosslessJson(workflowText), submittedText === null ? null : parseLosslessJson(submittedText)), firstStart };
  }

  /**
   * Moves a running job's run deadline to at least `seconds` from now. For a job whose engine has
   * finished within its deadline: storing what it made is all that is left, and the sweeper, which
   * expires a running job soon after its run deadline (its backstop for workers that vanished), must
   * not take that for a run that went on too long.
   */
  async extendRunDeadline(jobId: string, seconds: number, lease: RunLease): Promise<void> {
    await this.db.$executeRaw`
      UPDATE jobs SET run_deadline_at = now() + make_interval(secs => ${seconds})
      WHERE id = ${jobId}::uuid AND status = 'running' AND run_deadline_at < now() + make_interval(secs => ${seconds})
        AND worker_id = ${lease.workerId} AND attempts = ${lease.attempt}`;
  }

  /** Stores a running job's progress snapshot, while the run still holds the job. */
  async saveProgress(jobId: string, progress: object, lease: RunLease): Promise<void> {
    await this.db.$executeRaw`
      UPDATE jobs SET progress = ${JSON.stringify(progress)}::jsonb, updated_at = now()
      WHERE id = ${jobId}::uuid AND status IN ('running', 'canceling') AND worker_id = ${lease.workerId} AND attempts = ${lease.attempt}`;
  }

  /**
   * The condition (a SELECT of one row) that a run still holds its job: running or canceling, on
   * this worker, in this attempt. Statements of other tables written by a run (its outputs) are
   * guarded by it, so a run that lost its job records nothing.
   */
  leaseHeld(jobId: string, lease: RunLease): Prisma.Sql {
    return leaseHeld(jobId, lease);
  }

  // --- Scheduling: handing out, positions, the sweeper's finds ------------------------------------

  /**
   * Chooses up to `capacity` waiting jobs in the fair order (see Dispatcher) and marks them handed
   * out, their accounts served, in one statement. Only accounts with waiting jobs, and only their
   * first few jobs, are read (partial indexes jobs_waiting_idx and jobs_handed_out_idx): the cost
   * does not grow with the backlog. One round trip and one commit, whatever the number of jobs.
   */
  handOut(capacity: number, now: Date): Promise<{ id: string; account_id: string }[]> {
    return queryRows<{ id: string; account_id: string }>(this.db, Prisma.sql`
      WITH RECURSIVE waiting_accounts AS (
        (SELECT account_id FROM jobs WHERE status = 'queued' AND dispatched_at IS NULL ORDER BY account_id LIMIT 1)
        UNION ALL
        SELECT (SELECT j.account_id FROM jobs j
                WHERE j.status = 'queued' AND j.dispatched_at IS NULL AND j.account_id > w.account_id
                ORDER BY j.account_id LIMIT 1)
        FROM waiting_accounts w WHERE w.account_id IS NOT NULL
      ), candidates AS (
        SELECT a.id, a.last_dispatched_at, a.max_concurrent_jobs,
               (SELECT count(*) FROM jobs b
                WHERE b.account_id = a.id
                  AND (b.status IN ('running', 'canceling') OR (b.status = 'queued' AND b.dispatched_at IS NOT NULL)))::int AS busy
        FROM waiting_accounts w JOIN accounts a ON a.id = w.account_id
        WHERE a.status = 'active'
      ), picked AS (
        SELECT j.id, c.id AS account_id,
               row_number() OVER (ORDER BY j.rank + c.busy, c.last_dispatched_at ASC NULLS FIRST, j.created_at, j.id) AS turn
        FROM candidates c
        CROSS JOIN LATERAL (
          SELECT id, created_at, row_number() OVER (ORDER BY created_at, id)::int AS rank
          FROM (SELECT id, created_at FROM jobs
                WHERE account_id = c.id AND status = 'queued' AND dispatched_at IS NULL
                  -- Past its queue deadline a job is no worker's: the sweeper expires it.
                  AND (attempts > 0 OR queue_deadline_at IS NULL OR queue_deadline_at > ${now})
                ORDER BY created_at, id
                LIMIT greatest(0, least(${capacity}, c.max_concurrent_jobs - c.busy))) firsts
        ) j
        ORDER BY turn
        LIMIT ${capacity}
      ), claimed AS (
        UPDATE jobs SET dispatched_at = ${now}
        FROM picked WHERE jobs.id = picked.id AND jobs.status = 'queued' AND jobs.dispatched_at IS NULL
        RETURNING jobs.id, jobs.account_id, picked.turn
      ), served AS (
        UPDATE accounts SET last_dispatched_at = ${now} WHERE id IN (SELECT account_id FROM claimed)
      )
      SELECT id, account_id FROM claimed ORDER BY turn`);
  }

  /** Positions of all waiting jobs (0 = next); see positions.ts. */
  queuePositions(): Promise<Map<string, number>> {
    return queuePositions(this.db);
  }

  /** Positions of some waiting jobs, counted without ranking the whole queue; see positions.ts. */
  queuePositionsOf(jobIds: string[]): Promise<Map<string, number>> {
    return queuePositionsOf(this.db, jobIds);
  }

  /** Jobs handed out before `before` and still waiting (their run may be lost). */
  handedOutBefore(before: Date, take: number): Promise<{ id: string; dispatchedAt: Date | null }[]> {
    return this.db.job.findMany({ where: { status: 'queued', dispatchedAt: { lt: before } }, select: { id: true, dispatchedAt: true }, take });
  }

  /** Takes a handed-out job back into the waiting queue, if it is still as it was handed out; whether it was. */
  async unhand(jobId: string, dispatchedAt: Date | null): Promise<boolean> {
    return (await this.db.job.updateMany({ where: { id: jobId, status: 'queued', dispatchedAt }, data: { dispatchedAt: null } })).count === 1;
  }

  /** Running (or canceling) jobs not updated since `before`: their worker may be gone. */
  runningSilentSince(before: Date, take: number): Promise<Job[]> {
    return this.db.job.findMany({ where: { status: { in: ['running', 'canceling'] }, updatedAt: { lt: before } }, take });
  }

  /** Up to `limit` jobs of each kind past a deadline (see lateJobsQuery). */
  late(now: Date, runCutoff: Date, limit: number): Promise<LateJob[]> {
    return this.db.$queryRaw<LateJob[]>(lateJobsQuery(now, runCutoff, limit));
  }

  /** Ended jobs past their retention. */
  async retentionExpired(now: Date, take: number): Promise<string[]> {
    return (await this.db.job.findMany({ where: { expiresAt: { lt: now }, status: { in: [...TERMINAL_STATUSES] } }, select: { id: true }, take })).map((j) => j.id);
  }

  async deleteMany(jobIds: string[]): Promise<number> {
    return (await this.db.job.deleteMany({ where: { id: { in: jobIds } } })).count;
  }

  /**
   * Removes count rows left at zero (job_queue_counts, job_status_counts). The triggers leave such a
   * row in place, for the account's next job to update rather than insert again, and an insert batch
   * that added no job (all refused) leaves one too; positions read every queue-count row, so they go
   * on the sweeper's pass. It reads all of job_status_counts (a few rows per account with retained
   * jobs), as every metrics scrape does. Rows another transaction holds are skipped, not waited for:
   * waiting could deadlock with a statement that locks several accounts in order.
   */
  async dropEmptyCounts(): Promise<number> {
    const [row] = await this.db.$queryRaw<{ dropped: number }[]>`
      WITH queue AS (
        DELETE FROM job_queue_counts WHERE account_id IN (
          SELECT account_id FROM job_queue_counts WHERE waiting = 0 AND handed = 0 AND running = 0
          FOR UPDATE SKIP LOCKED)
        RETURNING 1
      ), status AS (
        DELETE FROM job_status_counts WHERE (account_id, status) IN (
          SELECT account_id, status FROM job_status_counts WHERE n = 0
          FOR UPDATE SKIP LOCKED)
        RETURNING 1
      )
      SELECT ((SELECT count(*) FROM queue) + (SELECT count(*) FROM status))::int AS dropped`;
    return row!.dropped;
  }

  /** Jobs per status, and jobs queued but not yet handed out, from the counts the triggers keep (metrics). */
  async counts(): Promise<{ by_status: Record<string, number>; undispatched: number }> {
    const [row] = await this.db.$queryRaw<{ by_status: Record<string, number>; undispatched: number }[]>`
          SELECT (SELECT coalesce(json_object_agg(status, n), '{}')
                  FROM (SELECT status::text, sum(n)::int AS n FROM job_status_counts GROUP BY status) s) AS by_status,
                 -- Queued and not yet handed to the run queue.
                 (SELECT coalesce(sum(waiting), 0)::int FROM job_queue_counts) AS undispatched`;
    return row!;
  }

  /** An account's queue counts as the triggers keep them (null: nothing queued). */
  queueCountsOf(accountId: string) {
    return this.db.jobQueueCount.findUnique({ where: { accountId } });
  }

  // --- Idempotency keys (their records are written with the jobs they created, by insertMany) ---

  /** The record of an account's Idempotency-Key, with the deployment of the job it created. */
  idempotencyRecord(accountId: string, key: string) {
    return this.db.idempotencyRecord.findUnique({ where: { accountId_key: { accountId, key } }, include: { job: { select: { deploymentId: true } } } });
  }

  /** Frees an account's key whose record has expired (the sweeper frees them all in time). */
  async dropExpiredKey(accountId: string, key: string): Promise<void> {
    await this.db.idempotencyRecord.deleteMany({ where: { accountId, key, expiresAt: { lte: new Date() } } });
  }

  async dropExpiredKeys(now: Date): Promise<void> {
    await this.db.idempotencyRecord.deleteMany({ where: { expiresAt: { lt: now } } });
  }

  // --- Reads --------------------------------------------------------------------------------------

  get(jobId: string): Promise<Job | null> {
    return this.db.job.findUnique({ where: { id: jobId } });
  }

  getOrThrow(jobId: string): Promise<Job> {
    return this.db.job.findUniqueOrThrow({ where: { id: jobId } });
  }

  async exists(jobId: string): Promise<boolean> {
    return (await this.db.job.findUnique({ where: { id: jobId }, select: { id: true } })) !== null;
  }

  /** Statuses of several jobs in one query (the batched reads of the event streams). */
  async statuses(jobIds: string[]): Promise<Map<string, Pick<Job, 'status' | 'createdAt'>>> {
    return new Map((await this.db.job.findMany({ where: { id: { in: jobIds } }, select: { id: true, status: true, createdAt: true } })).map((job) => [job.id, job]));
  }

  /** A job with its outputs, their assets and blobs, whoever's it is (webhook payloads). */
  withOutputs(jobId: string): Promise<JobWithOutputs | null> {
    return this.db.job.findUnique({ where: { id: jobId }, include: WITH_OUTPUTS });
  }

  /** The scope's job with its outputs, in one query (polling is the hot path); null out of scope. */
  async findInScope(scope: string | JobScope, jobId: string): Promise<JobWithOutputs | null> {
    const rows = await this.db.$queryRaw<JobRowWithOutputs[]>`
      SELECT ${jobColumns('j')}, ${OUTPUTS_OF_J}
      FROM jobs j
      WHERE j.id = ${jobId}::uuid AND ${inScope(scope)}`;
    return rows[0] ? withOutputs(rows[0]) : null;
  }

  /**
   * The workflow a job of the scope shows (as the client sent it), read from its text so that
   * integers beyond 2^53 keep every digit; null out of scope.
   */
  async workflowInScope(scope: string | JobScope, jobId: string): Promise<{ value: unknown } | null> {
    const rows = await this.db.$queryRaw<{ text: string }[]>`
      SELECT coalesce(j.submitted_workflow, j.workflow)::text AS text FROM jobs j
      WHERE j.id = ${jobId}::uuid AND ${inScope(scope)}`;
    return rows[0] ? { value: parseLosslessJson(rows[0].text) } : null;
  }

  /** One page of the scope's jobs with their outputs, in one query; `limit + 1` rows at most. */
  async page(scope: string | JobScope, q: JobPageQuery): Promise<JobWithOutputs[]> {
    const statuses = q.statuses ? Prisma.sql`AND j.status = ANY(${q.statuses}::"JobStatus"[])` : Prisma.empty;
    const after = q.after ? Prisma.sql`AND (j.created_at, j.id) < (${new Date(q.after.t)}, ${q.after.id}::uuid)` : Prisma.empty;
    const rows = await this.db.$queryRaw<JobRowWithOutputs[]>`
      SELECT ${jobColumns('j')}, ${OUTPUTS_OF_J}
      FROM jobs j
      WHERE ${inScope(scope)} ${statuses} ${after}
      ORDER BY j.created_at DESC, j.id DESC
      LIMIT ${q.limit + 1}`;
    return rows.map(withOutputs);
  }

  /** How many of the scope's jobs are waiting or running (v1's queue_remaining), `excluding` one. */
  countInFlight(scope: JobScope, excluding?: string | null): Promise<number> {
    return this.db.job.count({ where: { ...scopeWhere(scope), status: { in: IN_FLIGHT }, ...(excluding ? { id: { not: excluding } } : {}) } });
  }

  /** The scope's jobs in these statuses (all of them when `ids` is null, else those of `ids`), oldest number first. */
  listInScope(scope: JobScope, statuses: JobStatus[], ids: string[] | null = null): Promise<Job[]> {
    return this.db.job.findMany({ where: { ...scopeWhere(scope), status: { in: statuses }, ...(ids ? { id: { in: ids } } : {}) }, orderBy: [{ number: 'asc' }] });
  }

  /**
   * v1 history: the scope's ended jobs not taken out of it that ran (or failed or expired before
   * running), by number; `offset` < 0: the newest `take`, else `take` from the oldest past `offset`.
   */
  history(scope: JobScope, take: number, offset: number): Promise<JobWithOutputs[]> {
    return this.db.job.findMany({
      where: { ...scopeWhere(scope), status: { in: [...TERMINAL_STATUSES] }, historyHidden: false, OR: [{ startedAt: { not: null } }, { status: { in: ['failed', 'expired'] } }] },
      orderBy: [{ number: offset < 0 ? 'desc' : 'asc' }],
      take,
      skip: Math.max(offset, 0),
      include: WITH_OUTPUTS,
    });
  }

  /** Takes the scope's ended jobs (those of `ids`, or all when null) out of v1 history; the jobs stay. */
  async hideFromHistory(scope: JobScope, ids: string[] | null): Promise<void> {
    await this.db.job.updateMany({
      where: { ...scopeWhere(scope), status: { in: [...TERMINAL_STATUSES] }, historyHidden: false, ...(ids ? { id: { in: ids } } : {}) },
      data: { historyHidden: true },
    });
  }

  /** A job as the v1 socket reports it. */
  socketView(jobId: string): Promise<SocketJob | null> {
    return this.db.job.findUnique({ where: { id: jobId }, select: { id: true, status: true, error: true, progress: true, startedAt: true, completedAt: true, updatedAt: true, attempts: true, deploymentId: true } });
  }

  /** The progress of the scope's newest running job of this v1 client id. */
  async runningProgress(scope: JobScope, clientId: string): Promise<unknown> {
    const job = await this.db.job.findFirst({ where: { ...scopeWhere(scope), clientId, status: 'running' }, select: { progress: true }, orderBy: { startedAt: 'desc' } });
    return job?.progress ?? null;
  }

  /** Captured logs of the scope's jobs, newest capture first. */
  logsInScope(scope: JobScope, skip: number, take: number): Promise<JobLog[]> {
    return this.db.job.findMany({
      where: { ...scopeWhere(scope), logText: { not: null }, logCapturedAt: { not: null } },
      select: { logText: true, logCapturedAt: true },
      orderBy: [{ logCapturedAt: 'desc' }, { id: 'desc' }],
      skip,
      take,
    });
  }

  logOf(jobId: string): Promise<JobLog | null> {
    return this.db.job.findUnique({ where: { id: jobId }, select: { logText: true, logCapturedAt: true } });
  }

  /** Whether a job of the account that has not ended names this asset in its workflow (run under the asset's lock). */
  async assetInUse(tx: Prisma.TransactionClient, accountId: string, assetId: string): Promise<boolean> {
    const live = await tx.$queryRaw<{ n: bigint }[]>`
      SELECT count(*) AS n FROM jobs WHERE account_id = ${accountId}::uuid
      AND status IN ('queued', 'running', 'canceling') AND workflow::text LIKE ${'%' + assetId + '%'}`;
    return Number(live[0]?.n ?? 0) > 0;
  }
}

/** JobStore.leaseHeld, for statements built where no store is at hand (a run's outputs). */
export function leaseHeld(jobId: string, lease: RunLease): Prisma.Sql {
  return Prisma.sql`SELECT 1 FROM jobs WHERE id = ${jobId}::uuid AND status IN ('running', 'canceling')
          AND worker_id = ${lease.workerId} AND attempts = ${lease.attempt}`;
}

/** The store of a client, for callers (tests, tools) that hold a bare client. */
export function storeOf(jobs: JobStore | Db): JobStore {
  return jobs instanceof JobStore ? jobs : new JobStore(jobs);
}

/**
 * Up to `limit` jobs of each kind past a deadline: first waits past `now`, runs past `runCutoff`.
 * The conditions are literals matching the partial indexes jobs_queue_deadline_idx and
 * jobs_run_deadline_idx, so even a cached generic plan reads the late jobs and nothing else.
 */
export function lateJobsQuery(now: Date, runCutoff: Date, limit: number): Prisma.Sql {
  return Prisma.sql`
    (SELECT id, account_id, true AS in_queue, coalesce(deadline_at <= queue_deadline_at, false) AS own_deadline FROM jobs
     WHERE status = 'queued' AND attempts = 0 AND queue_deadline_at < ${now}
     ORDER BY queue_deadline_at LIMIT ${limit})
    UNION ALL
    (SELECT id, account_id, false AS in_queue, coalesce(deadline_at <= run_deadline_at, false) AS own_deadline FROM jobs
     WHERE status IN ('queued', 'running', 'canceling') AND run_deadline_at IS NOT NULL AND run_deadline_at < ${runCutoff}
     ORDER BY run_deadline_at LIMIT ${limit})`;
}

// The statements as functions of a bare client, for tests and tools that hold one.

export const finishJob = (db: Db, ...args: Parameters<JobStore['finish']>) => new JobStore(db).finish(...args);
export const claimJob = (db: Db, ...args: Parameters<JobStore['claim']>) => new JobStore(db).claim(...args);
export const dropEmptyCounts = (db: Db) => new JobStore(db).dropEmptyCounts();
export { queuePositions, queuePositionsOf };

/** JobStore's public face, for fakes in unit tests. */
export type JobStoreApi = { [K in keyof JobStore]: JobStore[K] };
