import { Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError, type JobView } from '#libs/contracts';
import type { Db, Job, JobStatus } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import { componentLogger } from '#libs/logging';
import { BLOB_STORE, CONFIG, DB } from '../core/tokens.js';
import { requestOrigin } from '../http/request-origin.js';
import { linkBase } from '../surface/request-scope.js';
import { assetSigner, jobUrls, JobStore, QueuePositions, renderJob, type JobPageQuery, type JobScope, type JobWithOutputs, type SignAsset } from '#libs/jobs';

export type { JobPageQuery, JobScope, JobWithOutputs };
export { scopeOf, scopeWhere } from '#libs/jobs';

/** Renders jobs and outputs as the contract shapes them, with links a client can follow as given. */
@Injectable()
export class JobViews {
  private readonly logger = componentLogger('JobViews');

  constructor(
    private readonly jobs: JobStore,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    private readonly positions: QueuePositions,
    // Assets only (an output event's asset): jobs are read through the store.
    @Inject(DB) private readonly db: Db,
  ) {}

  /**
   * The caller's job with its outputs, in one query (polling is the hot path), or 404 exactly as
   * for a job that does not exist (a job out of the scope included).
   */
  async find(scope: string | JobScope, jobId: string): Promise<JobWithOutputs> {
    const job = await this.findOrNull(scope, jobId);
    if (!job) throw ApiError.notFound('job');
    return job;
  }

  /** As `find`, with null for a job the caller does not have (v1 answers those its own way). */
  async findOrNull(scope: string | JobScope, jobId: string): Promise<JobWithOutputs | null> {
    return this.jobs.findInScope(scope, jobId);
  }

  /**
   * The workflow a job of the caller shows (as the client sent it), read from its text so that
   * integers beyond 2^53 keep every digit; not found like `find`.
   */
  async workflow(scope: string | JobScope, jobId: string): Promise<unknown> {
    const found = await this.jobs.workflowInScope(scope, jobId);
    if (!found) throw ApiError.notFound('job');
    return found.value;
  }

  /** One page of the caller's jobs with their outputs, in one query; `limit + 1` rows at most. */
  async page(scope: string | JobScope, q: JobPageQuery): Promise<JobWithOutputs[]> {
    return this.jobs.page(scope, q);
  }

  /** How many of the scope's jobs wait or run (v1's queue_remaining). */
  countInFlight(scope: JobScope): Promise<number> {
    return this.jobs.countInFlight(scope);
  }

  /** The scope's jobs in these statuses (those of `ids` when given), oldest first. */
  list(scope: JobScope, statuses: JobStatus[], ids: string[] | null = null): Promise<Job[]> {
    return this.jobs.listInScope(scope, statuses, ids);
  }

  /** The scope's v1 history page (see JobStore.history). */
  history(scope: JobScope, take: number, offset: number): Promise<JobWithOutputs[]> {
    return this.jobs.history(scope, take, offset);
  }

  /** Output links signed for the origin this request used (worked out only when a job has outputs). */
  private signer(request: FastifyRequest): SignAsset {
    return (asset, fileName) => assetSigner(this.store, this.config.signedUrlTtlSeconds, requestOrigin(request, this.config))(asset, fileName);
  }

  /** An `output` event's data with a freshly signed URL. */
  async outputEventView(data: Record<string, unknown>, request: FastifyRequest): Promise<Record<string, unknown>> {
    const asset = typeof data.id === 'string' ? await this.db.asset.findUnique({ where: { id: data.id } }) : null;
    if (!asset) return data;
    const signed = await this.signer(request)(asset, String(data.name ?? asset.filePath));
    return { ...data, url: signed.url, url_expires_at: signed.expiresAt.toISOString() };
  }

  urls(jobId: string, request: FastifyRequest): JobView['urls'] {
    return jobUrls(this.selfLink(jobId, request), this.config.jobs.captureLogs);
  }

  /** A job's address as this request reaches it (mount and deployment prefix included). */
  private selfLink(jobId: string, request: FastifyRequest): string {
    return `${linkBase(request, this.config)}/api/v2/jobs/${jobId}`;
  }

  async render(job: JobWithOutputs, request: FastifyRequest): Promise<JobView> {
    return (await this.renderMany([job], request))[0]!;
  }

  /**
   * A job this request has just created: as inserted (it has no outputs yet), or as it stands now
   * when the response waited (`readBack`): as its run ended it (`ended`, sent with its terminal
   * status), else read back. From here on the job exists, so a failed read answers the job as
   * inserted and an uncounted queue position as null, never an error: a client retrying without an
   * Idempotency-Key would create a second job.
   */
  async renderCreated(job: Job, request: FastifyRequest, readBack: boolean, ended: JobWithOutputs | null = null): Promise<JobView> {
    const inserted: JobWithOutputs = { ...job, outputs: [] };
    const current =
      ended ??
      (readBack
        ? await this.find(job.accountId, job.id).catch((err: Error) => {
            this.logger.warn(`new job ${job.id} not read back, answered as inserted: ${err.message}`);
            return inserted;
          })
        : inserted);
    const positions = current.status === 'queued' ? await this.newJobPositions(current) : new Map<string, number>();
    return this.renderOne(current, positions, request);
  }

  /**
   * The position of a job just created, counted again when a count fails. Should the database
   * keep failing, the job is answered all the same (a client retrying without an Idempotency-Key
   * would create another), as next in line rather than with no position.
   */
  private async newJobPositions(job: { id: string; createdAt: Date }): Promise<Map<string, number>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.positions.of([job]);
      } catch (err) {
        if (attempt >= 3) {
          this.logger.warn(`queue position of the new job ${job.id} not counted: ${(err as Error).message}`);
          return new Map<string, number>();
        }
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  }

  /** Several jobs; the queue positions of one page are all counted as of the same moment. */
  async renderMany(jobs: JobWithOutputs[], request: FastifyRequest): Promise<JobView[]> {
    const positions = await this.positions.of(jobs.filter((job) => job.status === 'queued'));
    return Promise.all(jobs.map((job) => this.renderOne(job, positions, request)));
  }

  private renderOne(job: JobWithOutputs, positions: Map<string, number>, request: FastifyRequest): Promise<JobView> {
    const parts = { self: this.selfLink(job.id, request), sign: this.signer(request), captureLogs: this.config.jobs.captureLogs };
    return renderJob(job, positions.get(job.id) ?? null, parts);
  }
}
