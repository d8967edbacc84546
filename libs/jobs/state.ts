import type { Db, Job, JobStatus, Prisma } from '#libs/db';

export const ACTIVE_STATUSES: JobStatus[] = ['queued', 'running', 'canceling'];

/** Which transitions exist. Every status change goes through `transition`, guarded by this table. */
const ALLOWED: Record<JobStatus, JobStatus[]> = {
  queued: ['running', 'canceled', 'expired', 'failed'],
  running: ['running', 'canceling', 'succeeded', 'failed', 'expired', 'canceled', 'queued'],
  canceling: ['canceled', 'succeeded', 'failed', 'expired'],
  succeeded: [],
  canceled: [],
  failed: [],
  expired: [],
};

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return ALLOWED[from].includes(to);
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
  guard: { workerId?: string } = {},
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
}

/**
 * Ends a job: the terminal transition and the charge for its execution time happen in one SQL
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
  guard: { workerId?: string } = {},
): Promise<Job | null> {
  const from = outcome.status === 'canceled' || outcome.status === 'expired' || outcome.status === 'failed' || outcome.status === 'succeeded'
    ? (['running', 'canceling', 'queued'] as JobStatus[]).filter((f) => canTransition(f, outcome.status))
    : [];
  if (from.length === 0) return null;
  const error = outcome.error ? JSON.stringify(outcome.error) : null;
  const log = outcome.log ?? null;
  const rows = await db.$queryRaw<{ id: string }[]>`
    WITH done AS (
      UPDATE jobs SET
        status = ${outcome.status}::"JobStatus",
        completed_at = ${now},
        execution_ms = CASE WHEN started_at IS NULL THEN NULL
                            ELSE greatest(0, floor(extract(epoch FROM (${now}::timestamptz - started_at)) * 1000))::int END,
        error = coalesce(${error}::jsonb, error),
        charged_credits = CASE WHEN started_at IS NULL THEN 0
                               ELSE ceil(greatest(0, extract(epoch FROM (${now}::timestamptz - started_at))))::bigint * ${creditsPerSecond} END,
        log_text = CASE WHEN ${log !== null} THEN ${log?.text ?? null} ELSE log_text END,
        log_truncated = CASE WHEN ${log !== null} THEN ${log?.truncated ?? false} ELSE log_truncated END,
        log_captured_at = CASE WHEN ${log !== null} THEN ${now}::timestamptz ELSE log_captured_at END,
        updated_at = ${now}
      WHERE id = ${jobId}::uuid
        AND status = ANY(${from}::"JobStatus"[])
        AND (${guard.workerId ?? null}::text IS NULL OR worker_id = ${guard.workerId ?? null})
      RETURNING id, account_id, charged_credits
    ), charge AS (
      INSERT INTO credit_ledger (account_id, amount, reason, ref)
      SELECT account_id, -charged_credits, 'job', id::text FROM done WHERE charged_credits > 0
      ON CONFLICT (reason, ref) DO NOTHING
      RETURNING account_id, amount
    ), balance AS (
      UPDATE accounts a SET credit_balance = a.credit_balance + c.amount FROM charge c WHERE a.id = c.account_id
      RETURNING a.id
    )
    SELECT id FROM done`;
  if (rows.length === 0) return null;
  return db.job.findUnique({ where: { id: jobId } });
}
