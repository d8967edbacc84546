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
 * Ends a job: the terminal transition and the charge for its execution time commit together, and
 * the ledger's unique (reason, ref) means a job is never charged twice.
 */
export async function finishJob(
  db: Db,
  jobId: string,
  outcome: Outcome,
  creditsPerSecond: number,
  now = new Date(),
  guard: { workerId?: string } = {},
): Promise<Job | null> {
  return db.$transaction(async (tx) => {
    const current = await tx.job.findUnique({ where: { id: jobId } });
    if (!current) return null;
    const executionMs = current.startedAt ? Math.max(0, now.getTime() - current.startedAt.getTime()) : null;
    const charge = executionMs === null ? 0n : BigInt(Math.ceil(executionMs / 1000) * creditsPerSecond);
    const done = await transition(tx, jobId, ['running', 'canceling', 'queued'], outcome.status, {
      completedAt: now,
      executionMs,
      error: outcome.error ?? undefined,
      chargedCredits: charge,
      ...(outcome.log ? { logText: outcome.log.text, logTruncated: outcome.log.truncated, logCapturedAt: now } : {}),
    }, guard);
    if (!done) return null;
    if (charge > 0n) {
      await tx.creditLedgerEntry.create({ data: { accountId: done.accountId, amount: -charge, reason: 'job', ref: jobId } });
      await tx.account.update({ where: { id: done.accountId }, data: { creditBalance: { decrement: charge } } });
    }
    return done;
  });
}
