import { createHash, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import { Prisma, type Account, type Db, type Deployment, type Job } from '#libs/db';
import { assetRefIds, validateWorkflow, workflowFormat, type ApiWorkflow, type NodeDefinitions, type ValidationOutcome } from '#libs/workflow';
import { jobFromRow } from '#libs/jobs';
import { CONFIG, DB } from '../core/tokens.js';
import { JobPipeline } from './job-pipeline.js';
import { checkPinnedStructure } from './deployment-rules.js';

export interface SubmitRequest {
  workflow: unknown;
  extraData?: Record<string, unknown>;
  idempotencyKey?: string;
  source: 'v2' | 'v1';
  clientId?: string | null;
  deployment?: Deployment | null;
  /** Given by v1 clients (`prompt_id`); otherwise a fresh UUID. */
  jobId?: string;
}

export type Submitted = { job: Job; replayed: boolean };

/** Thrown with the validation outcome so v1 can answer in the engine's shape and v2 in its own. */
export class WorkflowRejected extends Error {
  constructor(readonly outcome: Extract<ValidationOutcome, { ok: false }>) {
    super(outcome.error.message);
  }
}

const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** The violated constraint of a unique violation (PostgreSQL 23505), or null. */
function uniqueViolation(err: unknown): string | null {
  if (err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002') return JSON.stringify(err.meta ?? {});
  const text = `${(err as { code?: string }).code ?? ''} ${(err as Error).message ?? ''} ${JSON.stringify((err as { meta?: unknown }).meta ?? {})}`;
  return /23505|unique constraint/i.test(text) ? text : null;
}

/** A canonical JSON text: the same workflow gives the same hash whatever its key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The one way a job comes into existence, for v1 and v2 alike: validate, resolve assets, check
 * credits and limits, then insert the job (and its idempotency record) in one transaction and
 * wake the dispatcher. Nothing is created when any check fails.
 */
@Injectable()
export class SubmissionService {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
    private readonly pipeline: JobPipeline,
  ) {}

  async definitions(): Promise<NodeDefinitions> {
    const defs = await this.pipeline.definitions.get();
    if (defs) return defs;
    throw new ApiError('service_unavailable', 'No engine has reported its node definitions yet; retry shortly.', undefined, { 'retry-after': '5' });
  }

  /** Validation alone, shared with v1's own error shape. */
  async validate(workflow: unknown): Promise<{ workflow: ApiWorkflow; outputs: string[] }> {
    const format = workflowFormat(workflow);
    if (format === 'ui') throw new ApiError('workflow_format_ui', 'The workflow is in the editor (UI) format; export it in API format.');
    if (format === 'invalid') throw new ApiError('invalid_workflow', 'workflow must be an object in the engine API format.');
    const outcome = validateWorkflow(workflow, await this.definitions());
    if (!outcome.ok) throw new WorkflowRejected(outcome);
    return { workflow: workflow as ApiWorkflow, outputs: outcome.outputs };
  }

  async submit(account: Account, req: SubmitRequest): Promise<Submitted> {
    if (account.status !== 'active') {
      // v1 answers this with its own 429; v2 with 403 forbidden (authenticated, not allowed).
      throw new ApiError('forbidden', 'This account is not allowed to run jobs.');
    }
    if (req.deployment) this.checkDeployment(req.deployment, req.workflow);
    const { workflow, outputs } = await this.validate(req.workflow);
    await this.checkAssets(account, workflow);
    const requestHash = createHash('sha256').update(canonical(workflow)).digest('hex');
    if (req.idempotencyKey) {
      const replay = await this.replay(account, req.idempotencyKey, requestHash);
      if (replay) return { job: replay, replayed: true };
    }
    if (account.creditBalance <= 0n) throw new ApiError('insufficient_credits', 'The account has no credits left.');

    const jobId = req.jobId ?? randomUUID();
    const now = Date.now();
    const cfg = this.config.jobs;
    // Secrets first: a job a worker can pick up must already find its extra_data.
    if (req.extraData && Object.keys(req.extraData).length > 0) {
      await this.pipeline.vault.put(jobId, req.extraData, cfg.queueTimeoutSeconds + cfg.executionTimeoutSeconds + 600);
    }
    let job: Job | null;
    try {
      job = await this.insert(account, req, {
        id: jobId,
        workflow,
        outputs,
        requestHash,
        expiresAt: new Date(now + cfg.retentionSeconds * 1000),
        queueDeadlineAt: new Date(now + cfg.queueTimeoutSeconds * 1000),
        idempotencyExpiresAt: new Date(now + IDEMPOTENCY_TTL_MS),
      });
    } catch (err) {
      await this.pipeline.vault.delete(jobId).catch(() => undefined);
      const violated = uniqueViolation(err);
      // A concurrent duplicate won the race for this key: answer with its job.
      if (violated && req.idempotencyKey && violated.includes('idempotency')) {
        const replay = await this.replay(account, req.idempotencyKey, requestHash);
        if (replay) return { job: replay, replayed: true };
      }
      if (violated && req.jobId && violated.includes('jobs_pkey')) throw ApiError.invalid('A job with this prompt_id already exists.');
      throw err;
    }
    if (!job) {
      await this.pipeline.vault.delete(jobId).catch(() => undefined);
      throw ApiError.retryAfter('queue_full', `The account already has ${account.maxQueuedJobs} queued jobs, its limit.`, 10);
    }
    await this.pipeline.events.append(job.id, account.id, 'status', { status: 'queued', queue_position: null }).catch(() => undefined);
    this.pipeline.kick();
    return { job, replayed: false };
  }

  /**
   * One statement: the queue-limit check, the job and its idempotency record. Null when the
   * account's queue is full. A duplicate key fails the whole statement, so no job is left behind.
   */
  private async insert(
    account: Account,
    req: SubmitRequest,
    j: { id: string; workflow: ApiWorkflow; outputs: string[]; requestHash: string; expiresAt: Date; queueDeadlineAt: Date; idempotencyExpiresAt: Date },
  ): Promise<Job | null> {
    const key = req.idempotencyKey ?? null;
    const rows = await this.db.$queryRaw<Record<string, unknown>[]>`
      WITH room AS (
        SELECT count(*) < ${account.maxQueuedJobs} AS ok FROM jobs WHERE account_id = ${account.id}::uuid AND status = 'queued'
      ), job AS (
        INSERT INTO jobs (id, account_id, workflow, output_nodes, source, client_id, deployment_id, expires_at, queue_deadline_at)
        SELECT ${j.id}::uuid, ${account.id}::uuid, ${JSON.stringify(j.workflow)}::jsonb, ${j.outputs}::text[], ${req.source},
               ${req.clientId ?? null}, ${req.deployment?.id ?? null}, ${j.expiresAt}, ${j.queueDeadlineAt}
        FROM room WHERE room.ok
        RETURNING *
      ), idem AS (
        INSERT INTO idempotency_records (account_id, key, request_hash, job_id, expires_at)
        SELECT ${account.id}::uuid, ${key}, ${j.requestHash}, id, ${j.idempotencyExpiresAt} FROM job WHERE ${key}::text IS NOT NULL
        RETURNING job_id
      )
      SELECT * FROM job`;
    return rows[0] ? jobFromRow(rows[0]) : null;
  }

  /** The job an unexpired key already maps to; 422 when the key was used for another body. */
  private async replay(account: Account, key: string, requestHash: string): Promise<Job | null> {
    const record = await this.db.idempotencyRecord.findUnique({ where: { accountId_key: { accountId: account.id, key } }, include: { job: true } });
    if (!record) return null;
    if (record.expiresAt.getTime() <= Date.now()) {
      await this.db.idempotencyRecord.deleteMany({ where: { accountId: account.id, key, expiresAt: { lte: new Date() } } });
      return null;
    }
    if (record.requestHash !== requestHash) {
      throw new ApiError('idempotency_key_reuse', 'This Idempotency-Key was already used with a different request body.');
    }
    return record.job;
  }

  private async checkAssets(account: Account, workflow: ApiWorkflow): Promise<void> {
    const ids = assetRefIds(workflow);
    if (ids.length === 0) return;
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
    const valid = ids.filter((id) => uuid.test(id));
    const found = await this.db.asset.findMany({
      where: { id: { in: valid }, accountId: account.id, OR: [{ expiresAt: null }, { expiresAt: { gt: new Date() } }] },
      select: { id: true },
    });
    const have = new Set(found.map((a) => a.id));
    const missing = ids.filter((id) => !have.has(id));
    if (missing.length > 0) {
      throw new ApiError('missing_asset', 'The workflow references assets that do not exist.', { asset_ids: missing });
    }
  }

  private checkDeployment(deployment: Deployment, workflow: unknown): void {
    if (deployment.status === 'stopped') throw new ApiError('deployment_stopped', 'This deployment is stopped.');
    if (deployment.status === 'starting') throw ApiError.retryAfter('deployment_not_ready', 'This deployment is starting; retry shortly.', 5);
    const problems = checkPinnedStructure(deployment.workflow as unknown as ApiWorkflow, workflow);
    if (Object.keys(problems).length > 0) {
      throw new ApiError('invalid_workflow', 'A deployment runs its pinned workflow; only literal input values may differ.', { node_errors: problems });
    }
  }
}
