import { parseLosslessJson } from '#libs/contracts';
import { Prisma, type Db, type Job, type JobStatus } from '#libs/db';
import { jobStatusEventsCte } from '#libs/webhooks';

export const ACTIVE_STATUSES: JobStatus[] = ['queued', 'running', 'canceling'];

/** Which transitions exist. Every status change goes through `transition`, guarded by this table. */
const ALLOWED: Record<JobStatus, JobStatus[]> = {
  queued: ['running', 'canceled', 'expired', 'failed'],
  running: ['running', 'canceling', 'succeeded', 'failed', 'expired', 'canceled', 'queued'],
  // The contract's state table: a job whose cancel was accepted ends canceled, whatever its run's
  // own ending (a success or failure that raced the interrupt, its deadline): see finishJob.
  canceling: ['canceled'],
  succeeded: [],
  canceled: [],
  failed: [],
  expired: [],
};

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return ALLOWED[from].includes(to);
}

/**
 * One attempt of a job on one worker: its claim set the job's worker and attempt count. Whatever
 * the run records is guarded by it, so a run whose job another worker has taken over (this one
 * stopped answering for a while, then came back) records nothing: no output, progress or status.
 */
export interface RunLease {
  workerId: string;
  attempt: number;
}

/** The lease as Redis holds it (`JobKeys.lease`): the run's events are logged only while it matches. */
export function leaseToken(lease: RunLease): string {
  return `${lease.workerId}/${lease.attempt}`;
}

function isNotFound(err: unknown): boolean {
  return (err as { code?: string }).code === 'P2025';
}

/**
 * Moves a job from one of `from` to `to` in one guarded UPDATE: when two actors race (a cancel and
 * a success, a retry and a cancel), the database decides and the loser gets null.
 */
export async function transition(
  db: Db | Prisma.TransactionClient,
  jobId: string,
  from: JobStatus[],
  to: JobStatus,
  patch: Prisma.JobUpdateInput = {},
  guard: { workerId?: string; attempts?: number } = {},
): Promise<Job | null> {
  const allowedFrom = from.filter((f) => canTransition(f, to));
  if (allowedFrom.length === 0) return null;
  try {
    return await db.job.update({ where: { id: jobId, status: { in: allowedFrom }, ...guard }, data: { ...patch, status: to } });
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

export interface Outcome {
  status: 'succeeded' | 'failed' | 'canceled' | 'expired';
  error?: { code: string; message: string; node_id?: string | null; class_type?: string | null; traceback?: string | null } | null;
  log?: { text: string; truncated: boolean } | null;
  /** The last progress snapshot, stored with the terminal status. */
  progress?: object | null;
  /**
   * How long the engine worked on the job in the run that ends it. The job is charged for this and
   * for what earlier runs that handed it back reported (`billed_ms`); a run lost with its worker
   * reported nothing and costs nothing.
   */
  engineMs?: number;
  /** The service's own failure (its store could not keep the outputs): the job costs nothing. */
  free?: boolean;
  /** The run's execution messages as v1 clients were sent them ([type, data]), for v1 history. */
  engineMessages?: Array<[string, unknown]> | null;
}

/**
 * Ends a job: the terminal transition and the charge for the engine's time happen in one SQL
 * statement, so they commit together or not at all, and the ledger's unique (reason, ref) means
 * a job is never charged twice. (One statement rather than an interactive transaction: it holds
 * no connection between round trips, which matters on the hot path of every job.)
 */
export async function finishJob(
  db: Db,
  jobId: string,
  outcome: Outcome,
  creditsPerSecond: number,
  now = new Date(),
  guard: Partial<RunLease> = {},
): Promise<Job | null> {
  const terminal = outcome.status === 'canceled' || outcome.status === 'expired' || outcome.status === 'failed' || outcome.status === 'succeeded';
  // Any ending of a canceling job makes it canceled (below), so canceling is always a start.
  const from = terminal ? (['running', 'canceling', 'queued'] as JobStatus[]).filter((f) => f === 'canceling' || canTransition(f, outcome.status)) : [];
  if (from.length === 0) return null;
  const error = outcome.error ? JSON.stringify(outcome.error) : null;
  const log = outcome.log ?? null;
  const progress = outcome.progress ? JSON.stringify(outcome.progress) : null;
  const engineMs = Math.max(0, Math.round(outcome.engineMs ?? 0));
  const engineMessages = outcome.engineMessages ? JSON.stringify(outcome.engineMessages) : null;
  const rows = await db.$queryRaw<Record<string, unknown>[]>`
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
      RETURNING ${jobColumns()}
    ), charge AS (
      INSERT INTO credit_ledger (account_id, amount, reason, ref)
      SELECT account_id, -charged_credits, 'job', id::text FROM done WHERE charged_credits > 0
      ON CONFLICT (reason, ref) DO NOTHING
      RETURNING account_id, amount
    ), balance AS (
      UPDATE accounts a SET credit_balance = a.credit_balance + c.amount FROM charge c WHERE a.id = c.account_id
      RETURNING a.id
    ), ${jobStatusEventsCte(Prisma.sql`done`)}
    SELECT * FROM done`;
  return rows[0] ? jobFromRow(rows[0]) : null;
}

/**
 * Moves a running job's run deadline to at least `seconds` from now. For a job whose engine has
 * finished within its deadline: storing what it made is all that is left, and the sweeper, which
 * expires a running job soon after its run deadline (its backstop for workers that vanished), must
 * not take that for a run that went on too long.
 */
export async function extendRunDeadline(db: Db, jobId: string, seconds: number, lease: RunLease): Promise<void> {
  await db.$executeRaw`
    UPDATE jobs SET run_deadline_at = now() + make_interval(secs => ${seconds})
    WHERE id = ${jobId}::uuid AND status = 'running' AND run_deadline_at < now() + make_interval(secs => ${seconds})
      AND worker_id = ${lease.workerId} AND attempts = ${lease.attempt}`;
}

/** Stores a running job's progress snapshot, while the run still holds the job. */
export async function saveProgress(db: Db, jobId: string, progress: object, lease: RunLease): Promise<void> {
  await db.$executeRaw`
    UPDATE jobs SET progress = ${JSON.stringify(progress)}::jsonb, updated_at = now()
    WHERE id = ${jobId}::uuid AND status IN ('running', 'canceling') AND worker_id = ${lease.workerId} AND attempts = ${lease.attempt}`;
}

/**
 * A worker takes a queued job: running, on this worker, with its engine prompt id, one more
 * attempt, and (first time only) its start, queue wait and run deadline. One statement; null when
 * the job is no longer queued (canceled or expired while it waited), or has waited past its queue
 * deadline: such a job is the sweeper's to expire, whichever comes first. The queue deadline
 * bounds the wait before the first start only; a job handed back after its worker vanished runs
 * again under its run deadline.
 */
export async function claimJob(
  db: Db,
  jobId: string,
  claim: { workerId: string; enginePromptId: string; executionTimeoutSeconds: number },
): Promise<{ job: Job; firstStart: boolean } | null> {
  const rows = await db.$queryRaw<(Record<string, unknown> & { first_start: boolean; workflow_text: string; submitted_text: string | null })[]>`
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
    RETURNING ${jobColumns()}, (attempts = 1) AS first_start, workflow::text AS workflow_text, submitted_workflow::text AS submitted_text
    ), ${jobStatusEventsCte(Prisma.sql`claimed`)}
    SELECT * FROM claimed`;
  const row = rows[0];
  if (!row) return null;
  const { first_start: firstStart, workflow_text: workflowText, submitted_text: submittedText, ...job } = row;
  // Read again from their text: integers beyond 2^53 (seeds) reach the engine with every digit.
  return { job: { ...jobFromRow(job), workflow: parseLosslessJson(workflowText) as Prisma.JsonValue, submittedWorkflow: submittedText === null ? null : (parseLosslessJson(submittedText) as Prisma.JsonValue) }, firstStart };
}

// Raw statements name the columns this code knows instead of `*`. Statements are prepared
// (libs/db), and a prepared `*` over a table that a migration has since given another column
// fails ("cached plan must not change result type") on every replica still running this code.
const JOB_COLUMNS = Object.values(Prisma.JobScalarFieldEnum).map((field) => field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));

// Built once per alias: the claim, the finish, every insert batch and every poll use them.
const selectLists = new Map<string, Prisma.Sql>();

/** The `jobs` columns as a select list, qualified by `alias` when given. */
export function jobColumns(alias = ''): Prisma.Sql {
  let list = selectLists.get(alias);
  if (!list) {
    list = Prisma.raw(JOB_COLUMNS.map((column) => (alias ? `${alias}."${column}"` : `"${column}"`)).join(', '));
    selectLists.set(alias, list);
  }
  return list;
}

// Column name to field name, remembered: every row of every batch has the same few dozen columns.
const fieldNames = new Map<string, string>();

function fieldName(column: string): string {
  let name = fieldNames.get(column);
  if (name === undefined) {
    name = column.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
    if (fieldNames.size < 1_000) fieldNames.set(column, name);
  }
  return name;
}

/** A `jobs` row from raw SQL in the shape Prisma gives it (snake_case columns to camelCase). */
export function jobFromRow(row: Record<string, unknown>): Job {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) out[fieldName(k)] = v;
  return out as unknown as Job;
}
