import { createHash, randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { stringify as stableStringify } from 'safe-stable-stringify';
import { maxCancelAfterSeconds } from '#libs/accounts';
import { notExpired } from '#libs/assets';
import type { Config } from '#libs/config';
import { ApiError, copyJson, isRawJson, isUuid } from '#libs/contracts';
import type { Account, Db, Deployment, Job } from '#libs/db';
import { EngineReportCache, ExtraDataVault, InsertBatcher, JobEventLog, JobStore, type NewJobRow } from '#libs/jobs';
import { assetRefIds, isAssetRef, validateWorkflow, workflowFormat, type ApiWorkflow, type NodeDefinitions, type ValidationOutcome } from '#libs/workflow';
import { CONFIG, DB } from '../core/tokens.js';
import { withoutFileChoices } from '../inputs/file-inputs.js';
import { InputFiles } from '../inputs/input-files.service.js';
import { NODE_DEFINITIONS, Scheduling } from './job-system.providers.js';
import { checkPinnedStructure } from './deployment-rules.js';
import { jobDeadlines } from './job-deadlines.js';

export interface SubmitRequest {
  workflow: unknown;
  extraData?: Record<string, unknown>;
  idempotencyKey?: string;
  source: 'v2' | 'v1';
  clientId?: string | null;
  deployment?: Deployment | null;
  /** Given by v1 clients (`prompt_id`); otherwise a fresh UUID. */
  jobId?: string;
  /**
   * The workflow as the client sent it, when `workflow` is not that (v1 runs only the outputs that
   * validated): what the job shows as its workflow. Otherwise `workflow` is as sent.
   */
  submitted?: unknown;
  /** Cancel-After (v2): seconds from now the job may take, queued and running; capped by the tier. */
  cancelAfterSeconds?: number;
}


/** Thrown with the validation outcome so v1 can answer in the engine's shape and v2 in its own. */
export class WorkflowRejected extends Error {
  constructor(readonly outcome: Extract<ValidationOutcome, { ok: false }>) {
    super(outcome.error.message);
  }
}

const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** The same answer whoever's job holds the id: it says the id is in use, nothing about the job. */
const idTaken = () => ApiError.invalid('A job with this prompt_id already exists.');


function isUpperCaseAssetRef(value: unknown): value is { info: { id: string } } {
  return isAssetRef(value) && isUuid(value.info.id) && value.info.id !== value.info.id.toLowerCase();
}

/**
 * The workflow with its asset ids spelled as the database spells them (lower case), as the asset
 * routes accept either: the worker looks its inputs up by that spelling, and a deletion finds the
 * live jobs using an asset by it. Copied only when a reference needs it.
 */
function lowerCaseAssetIds(workflow: ApiWorkflow): ApiWorkflow {
  const needed = Object.values(workflow).some((node) => Object.values(node.inputs ?? {}).some(isUpperCaseAssetRef));
  if (!needed) return workflow;
  const copy = copyJson(workflow);
  for (const node of Object.values(copy)) {
    for (const value of Object.values(node.inputs ?? {})) if (isUpperCaseAssetRef(value)) value.info.id = value.info.id.toLowerCase();
  }
  return copy;
}

/**
 * A canonical JSON text: the same workflow gives the same hash whatever its key order (keys sorted
 * by safe-stable-stringify). Integers beyond 2^53 (raw JSON values: the lossless parser keeps only
 * whole numbers so) are written as bigints, digit for digit, so two seeds that differ past the 53rd
 * bit are two bodies. The text is byte for byte what earlier releases hashed: stored keys still match.
 */
function canonical(value: unknown): string {
  return stableStringify(value, (_key, v: unknown) => (isRawJson(v) ? BigInt(v.rawJSON) : v)) ?? '';
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
    private readonly inputs: InputFiles,
    private readonly jobs: JobStore,
    private readonly vault: ExtraDataVault,
    private readonly events: JobEventLog,
    private readonly scheduling: Scheduling,
    @Inject(NODE_DEFINITIONS) private readonly nodeDefinitions: EngineReportCache<NodeDefinitions>,
  ) {
    this.batcher = new InsertBatcher(jobs, (created) => this.queued(created));
  }

  /**
   * After each insert statement, for all the jobs it created at once: their `queued` events in one
   * Redis command, then one dispatcher kick. Not waited for: the dispatcher's first command leaves
   * on the same connection after the events, so each job's `queued` is in its log before any
   * worker can pick it up and log `running`.
   */
  private queued(jobs: Job[]): void {
    const entries = jobs.map((job) => ({ jobId: job.id, accountId: job.accountId }));
    void this.events.appendToMany(entries, 'status', { status: 'queued', queue_position: null }).catch(() => undefined);
    this.scheduling.kick();
  }

  private readonly batcher: InsertBatcher;

  async definitions(): Promise<NodeDefinitions> {
    const defs = await this.nodeDefinitions.get();
    if (defs) return defs;
    throw new ApiError('service_unavailable', 'No engine has reported its node definitions yet; retry shortly.', undefined, { 'retry-after': '5' });
  }

  /**
   * The workflow with the account's file names resolved to its assets, validated. A file name
   * validates only as one of the account's own files: against the engine's definitions with every
   * file list emptied, so any name left unresolved fails; the refusal then lists the account's
   * files, as the engine lists its folder's.
   */
  private async validate(accountId: string, workflow: unknown): Promise<{ workflow: ApiWorkflow; outputs: string[] }> {
    const format = workflowFormat(workflow);
    if (format === 'ui') throw new ApiError('workflow_format_ui', 'The workflow is in the editor (UI) format; export it in API format.');
    if (format === 'invalid') throw new ApiError('invalid_workflow', 'workflow must be an object in the engine API format.');
    const defs = await this.definitions();
    const resolved = await this.inputs.resolve(accountId, workflow, defs);
    const outcome = validateWorkflow(resolved, withoutFileChoices(defs));
    if (!outcome.ok) {
      // The refusal lists the account's own files and models where the engine lists its folders'.
      const named = validateWorkflow(resolved, await this.inputs.definitionsFor(accountId, defs));
      throw new WorkflowRejected(named.ok ? outcome : named);
    }
    return { workflow: resolved as ApiWorkflow, outputs: outcome.outputs };
  }

  async submit(account: Account, req: SubmitRequest): Promise<Job> {
    // An Idempotency-Key is single-use (the public v2 contract): any later request with it answers
    // 422 and runs nothing, before any other check. The key is taken only with the job it creates,
    // in one statement, so a submission that fails without a job leaves it free for a retry.
    // Only a keyed submission is ever compared with another, so only it is hashed.
    const keyed = req.idempotencyKey
      ? { key: req.idempotencyKey, hash: createHash('sha256').update(canonical(req.workflow)).digest('hex'), deployment: req.deployment ?? null }
      : null;
    if (keyed) await this.refuseUsedKey(account, keyed);
    if (account.status !== 'active') {
      // v1 answers this with its own 429; v2 with 403 forbidden (authenticated, not allowed).
      throw new ApiError('forbidden', 'This account is not allowed to run jobs.');
    }
    if (req.deployment) this.checkDeployment(req.deployment, req.workflow);
    const validated = await this.validate(account.id, req.workflow);
    const workflow = lowerCaseAssetIds(validated.workflow);
    const outputs = validated.outputs;
    const submitted = req.submitted ?? req.workflow;
    const assetIds = await this.checkAssets(account, workflow);
    if (account.creditBalance <= 0n) throw new ApiError('insufficient_credits', 'The account has no credits left.');

    const jobId = req.jobId ?? randomUUID();
    // A client-chosen id (v1 `prompt_id`) may name another job, another account's too: refuse it
    // before anything is stored under it, or that job's sealed extra_data would be replaced or deleted.
    if (req.jobId && (await this.jobs.exists(jobId))) throw idTaken();
    const now = Date.now();
    const cfg = this.config.jobs;
    // Secrets first: a job a worker can pick up must already find its extra_data.
    if (req.extraData && Object.keys(req.extraData).length > 0) {
      await this.vault.put(jobId, req.extraData, cfg.queueTimeoutSeconds + cfg.executionTimeoutSeconds + 600);
    }
    const row: NewJobRow = {
      id: jobId,
      accountId: account.id,
      workflow,
      submittedWorkflow: submitted === workflow ? null : submitted,
      outputNodes: outputs,
      source: req.source,
      clientId: req.clientId ?? null,
      deploymentId: req.deployment?.id ?? null,
      expiresAt: new Date(now + cfg.retentionSeconds * 1000),
      ...jobDeadlines(now, cfg.queueTimeoutSeconds, req.cancelAfterSeconds === undefined ? null : Math.min(req.cancelAfterSeconds, maxCancelAfterSeconds(account.tier))),
      idempotencyKey: keyed?.key ?? null,
      requestHash: keyed?.hash ?? null,
      idempotencyExpiresAt: new Date(now + IDEMPOTENCY_TTL_MS),
      maxQueued: account.maxQueuedJobs,
      assetIds,
    };
    let job: Job | null = null;
    let ours = true;
    try {
      for (let attempt = 0; attempt < 2 && !job; attempt++) {
        const result = await this.batcher.insert(row);
        if (result.kind === 'created') job = result.job;
        else if (result.kind === 'missing_asset') {
          // Deleted since checkAssets: the insert holds the assets it finds, so the job never runs without one.
          throw new ApiError('missing_asset', 'The workflow references assets that do not exist.', { asset_ids: result.assetIds });
        } else if (result.kind === 'queue_full') {
          throw ApiError.retryAfter('queue_full', `The account already has ${account.maxQueuedJobs} queued jobs, its limit.`, 10);
        } else if (result.kind === 'id_taken') {
          // Taken since the check above: what the vault holds under this id is the other job's.
          ours = false;
          throw idTaken();
        } else if (keyed) {
          // The key is taken: by a concurrent duplicate (refused, naming its job), or by an expired
          // record that refuseUsedKey() just removed (then insert again).
          await this.refuseUsedKey(account, keyed);
        }
      }
    } catch (err) {
      if (ours) await this.vault.delete(jobId).catch(() => undefined);
      throw err;
    }
    if (!job) {
      await this.vault.delete(jobId).catch(() => undefined);
      throw new ApiError('service_unavailable', 'The job could not be recorded; retry.', undefined, { 'retry-after': '1' });
    }
    // Its `queued` event and the dispatcher's kick went with its batch (queued() above).
    return job;
  }

  /**
   * 422 `idempotency_key_reuse` when an unexpired record holds the key; an expired one is removed.
   * Beyond the public contract, additively: where the key created a job the caller can reach from
   * here (same deployment, or off them all), `details.job_id` names it, so a client that lost the
   * answer finds its job with one GET. Keys are the account's: used on another deployment or
   * surface, the key is another request's, and this deployment first answers as it stands.
   */
  private async refuseUsedKey(account: Account, { key, hash, deployment }: { key: string; hash: string; deployment: Deployment | null }): Promise<void> {
    const record = await this.jobs.idempotencyRecord(account.id, key);
    if (!record) return;
    if (record.expiresAt.getTime() <= Date.now()) {
      await this.jobs.dropExpiredKey(account.id, key);
      return;
    }
    if (record.job.deploymentId !== (deployment?.id ?? null)) {
      if (deployment) this.checkDeploymentState(deployment);
      throw new ApiError('idempotency_key_reuse', 'This Idempotency-Key was already used for another request (on another deployment or surface).');
    }
    const message =
      record.requestHash === hash
        ? 'This Idempotency-Key was already used; the job it created is details.job_id.'
        : 'This Idempotency-Key was already used with a different request body; the job it created is details.job_id.';
    throw new ApiError('idempotency_key_reuse', message, { job_id: record.jobId });
  }

  /**
   * The ids of the assets the workflow references, once each is found to be the account's. Only a
   * first look: the insert checks them again under a lock (InsertBatcher), against deletions.
   */
  private async checkAssets(account: Account, workflow: ApiWorkflow): Promise<string[]> {
    const ids = assetRefIds(workflow);
    if (ids.length === 0) return [];
    const valid = ids.filter(isUuid);
    const found = await this.db.asset.findMany({
      where: { id: { in: valid }, accountId: account.id, ...notExpired() },
      select: { id: true },
    });
    const have = new Set(found.map((a) => a.id));
    const missing = ids.filter((id) => !have.has(id));
    if (missing.length > 0) {
      throw new ApiError('missing_asset', 'The workflow references assets that do not exist.', { asset_ids: missing });
    }
    return ids;
  }

  /** A deployment takes submissions only when ready, and only of its pinned structure. */
  checkDeployment(deployment: Deployment, workflow: unknown): void {
    this.checkDeploymentState(deployment);
    this.checkPinned(deployment, workflow);
  }

  private checkDeploymentState(deployment: Deployment): void {
    if (deployment.status === 'stopped') throw new ApiError('deployment_stopped', 'This deployment is stopped.');
    if (deployment.status === 'starting') throw ApiError.retryAfter('deployment_not_ready', 'This deployment is starting; retry shortly.', 5);
  }

  private checkPinned(deployment: Deployment, workflow: unknown): void {
    const problems = checkPinnedStructure(deployment.workflow as unknown as ApiWorkflow, workflow);
    if (Object.keys(problems).length > 0) {
      throw new ApiError('invalid_workflow', 'A deployment runs its pinned workflow; only literal input values may differ.', { node_errors: problems });
    }
  }
}
