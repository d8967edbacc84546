import { Inject, Injectable, Logger } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError, parseLosslessJson, type JobView } from '#libs/contracts';
import { Prisma, type Account, type Db, type Deployment, type Job, type JobStatus } from '#libs/db';
import type { BlobStore } from '#libs/storage';
import { BLOB_STORE, CONFIG, DB } from '../core/tokens.js';
import { requestOrigin } from '../http/request-origin.js';
import { linkBase } from '../surface/request-scope.js';
import { JobPipeline } from './job-pipeline.js';
import { assetSigner, jobColumns, jobFromRow, jobUrls, renderJob, type JobWithOutputs, type SignAsset } from '#libs/jobs';

export type { JobWithOutputs };

/**
 * Whose jobs a request sees: the account's, and on the deployment surface only the addressed
 * deployment's, so that a deployment's API reads, lists and cancels nothing else of the account
 * (its cloud jobs, another deployment's). `deploymentId: null` (cloud, self-hosted) does not filter.
 * A bare account id is the account's jobs unfiltered.
 */
export interface JobScope {
  accountId: string;
  deploymentId: string | null;
}

/** The jobs a request on `deployment` (null off the deployment surface) may see. */
export function scopeOf(account: Pick<Account, 'id'>, deployment: Pick<Deployment, 'id'> | null): JobScope {
  return { accountId: account.id, deploymentId: deployment?.id ?? null };
}

/** `inScope` for queries through Prisma's client, so that v1's queue and history filter as v2 does. */
export function scopeWhere(scope: JobScope): Prisma.JobWhereInput {
  return { accountId: scope.accountId, ...(scope.deploymentId === null ? {} : { deploymentId: scope.deploymentId }) };
}

/** The condition on `jobs j` that keeps a read within its scope. */
function inScope(owner: string | JobScope): Prisma.Sql {
  const { accountId, deploymentId } = typeof owner === 'string' ? { accountId: owner, deploymentId: null } : owner;
  const deployment = deploymentId === null ? Prisma.empty : Prisma.sql`AND j.deployment_id = ${deploymentId}`;
  return Prisma.sql`j.account_id = ${accountId}::uuid ${deployment}`;
}

/** One page of the caller's jobs, newest first; `after` is the last job of the previous page. */
export interface JobPageQuery {
  limit: number;
  statuses: JobStatus[] | null;
  after: { t: string; id: string } | null;
}

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

/** An output row of the one-query read in the shape `outputView` takes. */
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

/** Renders jobs and outputs as the contract shapes them, with links a client can follow as given. */
@Injectable()
export class JobViews {
  private readonly logger = new Logger('JobViews');

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
    @Inject(BLOB_STORE) private readonly store: BlobStore,
    private readonly pipeline: JobPipeline,
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
    const rows = await this.db.$queryRaw<JobRowWithOutputs[]>`
      SELECT ${jobColumns('j')}, ${OUTPUTS_OF_J}
      FROM jobs j
      WHERE j.id = ${jobId}::uuid AND ${inScope(scope)}`;
    return rows[0] ? withOutputs(rows[0]) : null;
  }

  /**
   * The workflow a job of the caller shows (as the client sent it), read from its text so that
   * integers beyond 2^53 keep every digit; not found like `find`.
   */
  async workflow(scope: string | JobScope, jobId: string): Promise<unknown> {
    const rows = await this.db.$queryRaw<{ text: string }[]>`
      SELECT coalesce(j.submitted_workflow, j.workflow)::text AS text FROM jobs j
      WHERE j.id = ${jobId}::uuid AND ${inScope(scope)}`;
    if (!rows[0]) throw ApiError.notFound('job');
    return parseLosslessJson(rows[0].text);
  }

  /** One page of the caller's jobs with their outputs, in one query; `limit + 1` rows at most. */
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
   * when the response waited (`readBack`). From here on the job exists, so a failed read answers
   * the job as inserted and an uncounted queue position as null, never an error: a client retrying
   * without an Idempotency-Key would create a second job.
   */
  async renderCreated(job: Job, request: FastifyRequest, readBack: boolean): Promise<JobView> {
    const inserted: JobWithOutputs = { ...job, outputs: [] };
    const current = readBack
      ? await this.find(job.accountId, job.id).catch((err: Error) => {
          this.logger.warn(`new job ${job.id} not read back, answered as inserted: ${err.message}`);
          return inserted;
        })
      : inserted;
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
        return await this.pipeline.queuePositions([job]);
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
    const positions = await this.pipeline.queuePositions(jobs.filter((job) => job.status === 'queued'));
    return Promise.all(jobs.map((job) => this.renderOne(job, positions, request)));
  }

  private renderOne(job: JobWithOutputs, positions: Map<string, number>, request: FastifyRequest): Promise<JobView> {
    const parts = { self: this.selfLink(job.id, request), sign: this.signer(request), captureLogs: this.config.jobs.captureLogs };
    return renderJob(job, positions.get(job.id) ?? null, parts);
  }
}
