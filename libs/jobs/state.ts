import { Prisma, type Job, type JobStatus } from '#libs/db';

export const ACTIVE_STATUSES: JobStatus[] = ['queued', 'running', 'canceling'];

/** Which transitions exist. Every status change goes through `JobStore.transition`, guarded by this table. */
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

/** The `jobs` columns, quoted, but `skip`. */
function columnsBut(skip: string[]): string[] {
  return JOB_COLUMNS.filter((c) => !skip.includes(c)).map((c) => `"${c}"`);
}

// Every column but the two workflows: a statement that reads those as text (every digit of big
// integers kept), or an insert whose caller has them (so PostgreSQL does not write them out again,
// nor the API parse them back).
const BUT_WORKFLOWS = Prisma.raw(columnsBut(['workflow', 'submitted_workflow']).join(', '));

// What the statement that ends a job returns: neither submitted workflow, nor the run's engine
// messages, nor its log, which nobody who ends a job reads, and which make up nearly all of a real
// job's row (a UI workflow, a prompt, every progress message, up to a log's tail); the prompt only
// where the job has no progress snapshot, whose node count the Job view then takes from it.
const ENDED = Prisma.raw(
  [...columnsBut(['workflow', 'submitted_workflow', 'engine_messages', 'log_text']), 'CASE WHEN "progress" IS NULL THEN "workflow" END AS "workflow"'].join(', '),
);

/** A job as the statement that ended it returns it (endedJobColumns). */
export type EndedJob = Omit<Job, 'workflow' | 'submittedWorkflow' | 'engineMessages' | 'logText'> & { workflow: Job['workflow'] | null };

/** The columns of an ended job (EndedJob). */
export function endedJobColumns(): Prisma.Sql {
  return ENDED;
}

/** The `jobs` columns but the two workflows (also what a new job's insert and its claim return; see `jobFromPoolRow`). */
export function jobColumnsButWorkflows(): Prisma.Sql {
  return BUT_WORKFLOWS;
}

/**
 * A job from the row `jobColumnsButWorkflows` returned through `queryRows` (int8 as text) and its
 * workflows, as inserted or as read from their text.
 */
export function jobFromPoolRow(row: Record<string, unknown>, workflow: unknown, submittedWorkflow: unknown): Job {
  const job = withInt8(jobFromRow(row));
  job.workflow = workflow as Job['workflow'];
  job.submittedWorkflow = (submittedWorkflow ?? null) as Job['submittedWorkflow'];
  return job;
}

/** An ended job from the row `endedJobColumns` returned through `queryRows`. */
export function endedJobFromPoolRow(row: Record<string, unknown>): EndedJob {
  return withInt8(jobFromRow(row)) as unknown as EndedJob;
}

/** The job's int8 columns, which node-postgres gives as text, as the BigInts Prisma gives. */
function withInt8(job: Job): Job {
  job.number = BigInt(job.number as unknown as string);
  if (job.chargedCredits !== null) job.chargedCredits = BigInt(job.chargedCredits as unknown as string);
  return job;
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
